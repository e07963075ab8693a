package httpapi

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/guardian-sec/guardian/internal/console"
)

// routeConsole serves the operator console: the page at /console, and its
// files under /console/. Loading them needs no token; everything the page
// shows comes from the admin API, which does.
func (a *API) routeConsole(r *gin.Engine) {
	r.GET("/console", serveConsoleFile(console.Page()))
	for _, name := range console.Assets() {
		f, ok := console.Lookup(name)
		if !ok {
			panic("httpapi: console asset " + name + " is not embedded")
		}
		r.GET("/console/"+name, serveConsoleFile(f))
	}
}

// serveConsoleFile answers with f under the console's strict headers: its
// Content-Security-Policy, no content sniffing, no referrer and no framing.
func serveConsoleFile(f console.File) gin.HandlerFunc {
	return func(c *gin.Context) {
		h := c.Writer.Header()
		h.Set("Content-Security-Policy", console.ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-cache")
		c.Data(http.StatusOK, f.ContentType, f.Body)
	}
}

func (a *API) explainRules(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"rules": a.cfg.Engine.Rules().Explain()})
}
