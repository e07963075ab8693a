package main

// version is guardian's release, "dev" unless the build sets it with
// -ldflags "-X main.version=v1.2.3", as deploy/image.sh does.
var version = "dev"
