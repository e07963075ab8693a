package server

import (
	"fmt"
	"os"
	"time"

	"github.com/guardian-sec/guardian/internal/breached"
)

// breachedFile is the breached-password filter of Config.BreachedPath: the
// filter in use, and the file it was read from as it was then, so that a
// reload of an unchanged file reads nothing.
type breachedFile struct {
	holder breached.Holder
	stat   os.FileInfo
}

// loadBreached loads the filter at start: an unusable file stops the start.
func (s *Server) loadBreached() error {
	if s.cfg.BreachedPath == "" {
		return nil
	}
	if _, err := s.openBreached(); err != nil {
		return fmt.Errorf("server: --breached: %w", err)
	}
	return nil
}

// ReloadBreached reads the breached-password filter file again, as SIGHUP
// asks, when it changed since it was loaded. A file that cannot be used is
// refused, logged, and the filter in use stays; lookups under way finish on
// the filter they started with. Without Config.BreachedPath it does
// nothing.
func (s *Server) ReloadBreached() error {
	if s.cfg.BreachedPath == "" {
		return nil
	}
	s.breachedMu.Lock()
	defer s.breachedMu.Unlock()
	if st, err := os.Stat(s.cfg.BreachedPath); err == nil && s.breached.stat != nil &&
		os.SameFile(st, s.breached.stat) && st.Size() == s.breached.stat.Size() && st.ModTime().Equal(s.breached.stat.ModTime()) {
		s.log.Info("breached-password filter unchanged, kept", "source", s.cfg.BreachedPath)
		return nil
	}
	old := s.breached.holder.Load()
	if _, err := s.openBreached(); err != nil {
		s.log.Warn("breached-password filter reload refused, previous filter kept", "source", s.cfg.BreachedPath, "err", err,
			"entries", old.Filter.Info().Entries, "sha256", old.Filter.Info().Checksum)
		return fmt.Errorf("server: --breached: %w", err)
	}
	return nil
}

// openBreached loads the file and makes it the filter in use.
func (s *Server) openBreached() (*breached.Loaded, error) {
	path := s.cfg.BreachedPath
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	f, err := breached.Open(path)
	if err != nil {
		return nil, err
	}
	l := &breached.Loaded{Filter: f, Source: path, LoadedAt: s.cfg.Now()}
	s.breached.holder.Store(l)
	s.breached.stat = st
	info := f.Info()
	s.metrics.BreachedEntries.Set(float64(info.Entries))
	s.log.Info("breached-password filter loaded", "source", path, "format", string(info.Format), "entries", info.Entries,
		"built_at", info.BuiltAt.Format(time.RFC3339), "bytes", info.Bytes, "sha256", info.Checksum)
	if info.Format.Hash() != breached.HashSHA1 {
		s.log.Warn("the breached-password filter holds NTLM hashes: POST /v1/passwords/check answers 404 and checks with password_sha1 answer without \"breached\"; build one with --format sha1 or plain for them", "source", path)
	}
	return l, nil
}
