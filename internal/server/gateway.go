package server

import (
	"context"
	"fmt"

	"github.com/guardian-sec/guardian/internal/gateway"
	"github.com/guardian-sec/guardian/internal/httpapi"
)

// Key purposes of the gateway: its challenges are signed under the signing
// key, its secret fingerprints keyed under the hash key, so that every
// instance of a fleet fingerprints one secret alike.
const (
	challengePurpose   = "guardian gateway challenge v1"
	fingerprintPurpose = "guardian gateway secret fingerprint v1"
)

// loadGateway reads Config.ProxyPath, when set: a file that does not parse
// stops New.
func (s *Server) loadGateway() (*gateway.File, error) {
	if s.cfg.ProxyPath == "" {
		return nil, nil
	}
	f, err := gateway.Load(s.cfg.ProxyPath)
	if err != nil {
		return nil, fmt.Errorf("server: --proxy: %w", err)
	}
	return f, nil
}

// newGateway builds the proxies of f, deciding through dec, the decider
// the API uses: the same engine, plan, attempt ids and decision log; spent
// claims solved challenges fleet-wide (nil on the embedded store).
func (s *Server) newGateway(f *gateway.File, dec httpapi.Decider, spent gateway.Claimer) (*gateway.Gateway, error) {
	hashKey := s.cfg.HashKey
	if hashKey.IsZero() {
		hashKey = s.keys.Signing()
	}
	return gateway.New(gateway.Config{
		File:           f,
		Decider:        dec,
		Breached:       &s.breached.holder,
		ChallengeKey:   s.keys.Signing().Derive(challengePurpose),
		FingerprintKey: hashKey.Derive(fingerprintPurpose),
		Registerer:     s.registry,
		Logger:         s.log,
		TLS:            s.TLSConfig,
		Spent:          spent,
		Now:            s.cfg.Now,
	})
}

// ProxyAddrs returns the addresses the gateway's proxies listen on, once
// started, in the proxy file's order; nil without Config.ProxyPath.
func (s *Server) ProxyAddrs() []string {
	if s.gateway == nil {
		return nil
	}
	return s.gateway.Addrs()
}

// proxiesView is what GET /v1/proxies answers: nil without a proxy file.
func (s *Server) proxiesView() func() any {
	if s.gateway == nil {
		return nil
	}
	return func() any { return s.gateway.View() }
}

// shutdownGateway stops the proxies, when there are any.
func (s *Server) shutdownGateway(ctx context.Context) error {
	if s.gateway == nil {
		return nil
	}
	return s.gateway.Shutdown(ctx)
}
