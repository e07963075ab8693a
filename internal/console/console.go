// Package console is guardian's operator console: one page of plain HTML,
// CSS and JavaScript, embedded in the binary, that reads the admin API with
// a token the operator pastes. Nothing is loaded from another origin and
// nothing is built: the files in assets/ are what the browser gets.
//
// The page keeps the token in the tab's sessionStorage only; it never puts
// it in a URL, a cookie or the page itself. The HTTP layer serves the files
// with ContentSecurityPolicy, which allows scripts, styles and requests to
// guardian's own origin alone.
package console

import (
	"embed"
	"path"
)

//go:embed assets
var assets embed.FS

// ContentSecurityPolicy is the policy every console file is served with:
// only the console's own files run or style the page, only guardian's own
// API is fetched, forms submit nowhere and no other page may frame it.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// File is one file of the console.
type File struct {
	// Name is the file's name: "index.html", "console.js", "console.css",
	// "icon.svg".
	Name string
	// ContentType is its media type, with charset.
	ContentType string
	// Body is its content; callers must not modify it.
	Body []byte
}

// contentTypes are the media types of the files the console has.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

// Page is the console's page, index.html.
func Page() File {
	f, ok := Lookup("index.html")
	if !ok {
		panic("console: index.html is not embedded")
	}
	return f
}

// Lookup returns the file called name, and whether there is one. Names are
// plain file names: anything with a slash is not a console file.
func Lookup(name string) (File, bool) {
	ct, ok := contentTypes[path.Ext(name)]
	if !ok || name != path.Base(name) {
		return File{}, false
	}
	body, err := assets.ReadFile("assets/" + name)
	if err != nil {
		return File{}, false
	}
	return File{Name: name, ContentType: ct, Body: body}, true
}

// Assets lists the names of the files the page loads besides itself, each
// served under console/ next to the page.
func Assets() []string { return []string{"icon.svg", "console.css", "console.js"} }
