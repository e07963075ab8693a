package server

import (
	"errors"
	"fmt"

	"github.com/guardian-sec/guardian/internal/certfile"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// errHashFollowsKey refuses a new first signing key while the hash key is
// derived from the signing key: every limit and hard stop would start over.
var errHashFollowsKey = errors.New("server: the first signing key changed, but the hashes of every limit are keyed by it without --hash-key-file: set a hash key of its own to rotate without a restart, or restart every instance at once to start the limits over")

// signingKeys returns cfg's signing keys, the one that signs first: the
// lines of SigningKeyFile when it is set, SigningKey otherwise.
func signingKeys(cfg Config) ([]secret.Key, error) {
	if cfg.SigningKeyFile == "" {
		if cfg.SigningKey.IsZero() {
			return nil, errors.New("server: no signing key")
		}
		return []secret.Key{cfg.SigningKey}, nil
	}
	keys, err := secret.ReadKeys(cfg.SigningKeyFile)
	if err != nil {
		return nil, fmt.Errorf("server: --signing-key-file: %w", err)
	}
	return keys, nil
}

// newKeyedServer returns newServer's instance of cfg with its signing keys
// in force, Config.SigningKeyFile's when it is set, and its TLS
// certificate loaded.
func newKeyedServer(cfg Config) (*Server, error) {
	signing, err := signingKeys(cfg)
	if err != nil {
		return nil, err
	}
	ownHashKey := !cfg.HashKey.IsZero()
	cfg.SigningKey = signing[0]
	s := newServer(withDefaults(cfg))
	s.ownHashKey = ownHashKey
	s.keys = tokens.NewKeys(signing[0])
	s.setKeys(signing)
	if s.tls, err = loadTLS(s.cfg); err != nil {
		return nil, err
	}
	return s, nil
}

// setKeys puts keys in force, the first signing, with the previous signing
// keys verifying too, and shows their ids in the metrics.
func (s *Server) setKeys(keys []secret.Key) {
	s.keys.Set(keys[0], append(keys[1:], s.cfg.PreviousSigningKeys...)...)
	s.metrics.SetSigningKeys(s.keys.IDs())
}

// ReloadKeys reads the signing key file again, as SIGHUP and a change of
// the file ask, and puts its keys in force; by says who asked, for the log.
// A file that does not parse, or a new first key while the hash key
// follows the signing key, is refused and logged, and the keys in force
// stay. Without Config.SigningKeyFile it does nothing.
func (s *Server) ReloadKeys(by string) error {
	if s.cfg.SigningKeyFile == "" {
		return nil
	}
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	keys, err := secret.ReadKeys(s.cfg.SigningKeyFile)
	if err == nil && !s.ownHashKey && !keys[0].Equal(s.keys.Signing()) {
		err = errHashFollowsKey
	}
	sign, verify := s.keys.IDs()
	if err != nil {
		s.log.Warn("signing key file refused, keys in force kept", "by", by, "file", s.cfg.SigningKeyFile, "err", err, "signing_kid", sign, "kids", verify)
		return err
	}
	s.setKeys(keys)
	sign, verify = s.keys.IDs()
	s.log.Info("signing keys loaded", "by", by, "file", s.cfg.SigningKeyFile, "signing_kid", sign, "kids", verify)
	return nil
}

// watchKeys reloads the signing keys whenever the key file's content
// changes, until Shutdown: a Kubernetes Secret updated in place (the
// kubelet swaps the mount's symlink) or a file rewritten or replaced.
func (s *Server) watchKeys() {
	if s.cfg.SigningKeyFile == "" {
		return
	}
	s.watch(s.cfg.SigningKeyFile, func() { _ = s.ReloadKeys("watch") })
}

// loadTLS reads cfg's certificate and key, or returns nil when cfg serves
// no TLS.
func loadTLS(cfg Config) (*certfile.Pair, error) {
	switch {
	case cfg.TLSCertFile == "" && cfg.TLSKeyFile == "":
		return nil, nil
	case cfg.TLSCertFile == "" || cfg.TLSKeyFile == "":
		return nil, errors.New("server: --tls-cert-file and --tls-key-file go together")
	}
	p, err := certfile.Load(cfg.TLSCertFile, cfg.TLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	return p, nil
}

// ReloadTLS reads the TLS certificate and key again, as SIGHUP and a
// change of either file ask; new connections get the new certificate,
// open ones keep theirs. A pair that does not load is refused and logged,
// and the pair in force stays. Without TLS it does nothing.
func (s *Server) ReloadTLS(by string) error {
	if s.tls == nil {
		return nil
	}
	cert, key := s.tls.Files()
	if err := s.tls.Reload(); err != nil {
		s.log.Warn("TLS certificate refused, the one in force kept", "by", by, "cert", cert, "key", key, "err", err, "expires_at", s.tls.NotAfter())
		return err
	}
	s.log.Info("TLS certificate loaded", "by", by, "cert", cert, "expires_at", s.tls.NotAfter())
	return nil
}

// watchTLS reloads the certificate whenever the content of its file or of
// its key's changes, until Shutdown. A pair rewritten one file at a time is
// refused at the first change and taken at the second.
func (s *Server) watchTLS() {
	if s.tls == nil {
		return
	}
	cert, key := s.tls.Files()
	for _, f := range []string{cert, key} {
		s.watch(f, func() { _ = s.ReloadTLS("watch") })
	}
}

// Hangup reloads what SIGHUP reloads: the rules file, the signing key
// file, the TLS certificate and the breached-password filter. Each logs
// its outcome; whatever is refused keeps what was in force.
func (s *Server) Hangup() {
	_, _ = s.Reload()
	_ = s.ReloadKeys("signal")
	_ = s.ReloadTLS("signal")
	_ = s.ReloadBreached()
}
