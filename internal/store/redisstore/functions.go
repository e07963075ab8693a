package redisstore

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The do script as a library of Redis functions (Redis 7.0 and later). A
// script's text runs whole on every call, so every call of the do script
// first defines prelude's, familiar's, distinct's and the do script's
// functions: about 28 µs before its first op, a sixth of a lone built-in
// check's time inside Redis (docs/performance.md). A library's code runs
// once, when FUNCTION LOAD loads it, and FCALL runs only its function. So
// a Store configured for it (Config.Functions) loads the do script as a
// library, at Warm or in the background after a script call succeeds, and
// calls the function from then on. Where Redis refuses the library (Redis
// 6.2, a default user without FUNCTION LOAD or FCALL) the Store runs the
// script, as before, and so it does as an ACL user (guardian's ACL leaves
// FUNCTION LOAD out: it could replace any library on the server) and on a
// Cluster, whose every master would need the library. When Redis loses it (a restart without persistence,
// FUNCTION FLUSH) the Store runs the script until it is loaded again.
// Either way the same text decides: the function is the script's main.
//
// Redis checks a call of a function that may write against what refuses
// writes (out of memory, a replica, a failed save) before it runs it; a
// script meets those only at its first write, so that a peek or a denied
// check still answers. A call the function was refused so runs the script.

var (
	// doLibrary is the library's name and doFunction its function's, both
	// named by the text's SHA1: instances of two releases that share a
	// Redis each call their own.
	doLibrary, doFunction = libraryNames(doBody)
	doLibraryCode         = "#!lua name=" + doLibrary + "\n" + doBody + "redis.register_function('" + doFunction + "', main)\n"

	// The command that calls the function, boxed once (evalDo).
	argFcall, argDoFunction any = "fcall", doFunction
)

// libraryNames names the library of text and its function.
func libraryNames(text string) (library, function string) {
	sum := sha1.Sum([]byte(text))
	v := hex.EncodeToString(sum[:8])
	return "guardian_" + v, "guardian_do_" + v
}

// Whether a Store calls the library (functions.state).
const (
	// functionsUntried: not loaded yet; calls run the script.
	functionsUntried int32 = iota
	// functionsLoaded: calls run the function.
	functionsLoaded
	// functionsRefused: Redis refused the library; calls run the script.
	functionsRefused
)

// retryLoad is how long a Store waits after a load that failed, and was
// not refused, before it tries again.
const retryLoad = time.Minute

// functions is what a Store knows of its library.
type functions struct {
	// wanted is Config.Functions.
	wanted  bool
	state   atomic.Int32
	loading atomic.Bool
	// failed is when a load last failed without a refusal (Unix ns).
	failed atomic.Int64
	// refusal is Redis's answer when it refused the library.
	refusal atomic.Pointer[error]
}

// defaultUser reports whether c logs in as Redis's default user: no user,
// or the one named "default".
func defaultUser(c redis.UniversalClient) bool {
	var user string
	switch c := c.(type) {
	case *redis.Client:
		user = c.Options().Username
	case *redis.ClusterClient:
		user = c.Options().Username
	default:
		return false
	}
	return user == "" || user == "default"
}

// errClusterScripts is why a Store on a Cluster runs the script.
var errClusterScripts = errors.New("redisstore: a Cluster runs the do script, not the library")

// Functions reports whether the Store's do calls run the library, and
// why not when Redis refused it.
func (s *Store) Functions() (bool, error) {
	if p := s.fn.refusal.Load(); p != nil {
		return false, *p
	}
	return s.fn.state.Load() == functionsLoaded, nil
}

// loadFunctions loads the library, unless the Store is not configured
// for it. A refusal (a Cluster, an ACL without FUNCTION LOAD, a Redis
// without functions) is final for the Store; any other failure (no
// answer, out of memory, a replica) leaves it to a later try.
func (s *Store) loadFunctions(ctx context.Context) error {
	if !s.fn.wanted {
		return nil
	}
	err := errClusterScripts
	if s.cluster == nil {
		err = s.c.FunctionLoad(ctx, doLibraryCode).Err()
		if redis.HasErrorPrefix(err, "Library '"+doLibrary+"' already exists") {
			err = nil
		}
	}
	switch {
	case err == nil:
		s.fn.state.Store(functionsLoaded)
	case s.cluster != nil || refused(err):
		s.refuseFunctions(err)
	default:
		s.fn.failed.Store(time.Now().UnixNano())
	}
	return err
}

// refused reports whether err says that Redis does not let the Store load
// or call the library: no permission, or no such command.
func refused(err error) bool {
	return redis.IsPermissionError(err) || redis.HasErrorPrefix(err, "unknown command") ||
		redis.HasErrorPrefix(err, "unknown subcommand")
}

// refuseFunctions makes the Store run the script from now on, Redis
// having answered err.
func (s *Store) refuseFunctions(err error) {
	s.fn.refusal.Store(&err)
	s.fn.state.Store(functionsRefused)
}

// refusedWrites reports whether err is Redis refusing a call that may
// write before it runs it, or at its first write: nothing was written
// either way.
func refusedWrites(err error) bool {
	for _, p := range []string{"OOM", "READONLY", "MISCONF", "NOREPLICAS", "MASTERDOWN"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

// loadLater loads the library in the background, one load at a time and
// none within retryLoad of one that failed, unless the Store is not
// configured for it or it is loaded or refused.
func (s *Store) loadLater() {
	if !s.fn.wanted || s.fn.state.Load() != functionsUntried || time.Since(time.Unix(0, s.fn.failed.Load())) < retryLoad ||
		!s.fn.loading.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer s.fn.loading.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.loadFunctions(ctx)
	}()
}

// evalDo runs the do script with keys and args: the library's function
// when it is loaded, else the script as Script.Run does (EVALSHA, and EVAL
// when Redis does not hold it). A function Redis no longer has, or no
// longer lets the Store call, gives way to the script, and so does a call
// of it that Redis refused before running it (refusedWrites); one Redis
// no longer has is loaded again. It hands the client a pointer to each key
// where Script.Run would box it: a check's twenty-odd keys would cost as
// many allocations. keys must stay unchanged until it returns.
func (s *Store) evalDo(ctx context.Context, keys []string, args []any) (any, error) {
	return s.evalDoAs(ctx, s.fn.state.Load() == functionsLoaded, keys, args)
}

// evalDoAs is evalDo, calling the library's function when loaded is set.
func (s *Store) evalDoAs(ctx context.Context, loaded bool, keys []string, args []any) (any, error) {
	head, name := argEvalSha, doHash
	if loaded {
		head, name = argFcall, argDoFunction
	}
	cmd := make([]any, 0, 3+len(keys)+len(args))
	cmd = append(cmd, head, name, len(keys))
	for i := range keys {
		cmd = append(cmd, &keys[i])
	}
	reply, err := s.c.Do(ctx, append(cmd, args...)...).Result()
	switch {
	case err == nil:
		if !loaded {
			s.loadLater()
		}
		return reply, nil
	case loaded && redis.HasErrorPrefix(err, "Function not found"):
		s.fn.state.CompareAndSwap(functionsLoaded, functionsUntried)
		return s.evalDoAs(ctx, false, keys, args)
	case loaded && refused(err):
		// An ACL changed since, or a failover to an older Redis.
		s.refuseFunctions(err)
		return s.evalDoAs(ctx, false, keys, args)
	case loaded && refusedWrites(err):
		return s.evalDoAs(ctx, false, keys, args)
	case !loaded && redis.HasErrorPrefix(err, "NOSCRIPT"):
		return doScript.Eval(ctx, s.c, keys, args...).Result()
	}
	return reply, err
}
