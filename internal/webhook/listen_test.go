package webhook_test

import (
	"net"
	"net/url"
)

// listen listens on the host and port of rawURL.
func listen(rawURL string) (net.Listener, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	return net.Listen("tcp", u.Host)
}
