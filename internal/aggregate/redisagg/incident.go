package redisagg

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/guardian-sec/guardian/internal/incident"
	"github.com/guardian-sec/guardian/internal/webhook"
)

// IncidentKey is the key of the fleet's incident snapshots: one hash,
// each instance's snapshot under its id.
const IncidentKey = "guardian:v1:{incident}"

// Incident is an incident.Shared on Redis: a write is one pipelined round
// trip of HSET and PEXPIRE, a read one HGETALL. Snapshots name keys and
// accounts by hashed subjects only. It holds no state and is safe for
// concurrent use.
type Incident struct {
	c redis.UniversalClient
}

var _ incident.Shared = (*Incident)(nil)

// NewIncident returns an Incident on c, which the caller keeps and closes.
func NewIncident(c redis.UniversalClient) *Incident { return &Incident{c: c} }

// Put stores snap as instance's and keeps the key for keep after this
// write.
func (s *Incident) Put(ctx context.Context, instance string, snap []byte, keep time.Duration) error {
	if instance == "" || keep < time.Millisecond {
		return fmt.Errorf("%w: incident snapshot without an instance, or keep %v under 1ms", ErrBadBatch, keep)
	}
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, IncidentKey, instance, snap)
		p.PExpire(ctx, IncidentKey, keep)
		return nil
	})
	if err != nil {
		return fmt.Errorf("redisagg: incident snapshot: %w", err)
	}
	return nil
}

// Get returns every instance's snapshot.
func (s *Incident) Get(ctx context.Context) (map[string][]byte, error) {
	m, err := s.c.HGetAll(ctx, IncidentKey).Result()
	if err != nil {
		return nil, fmt.Errorf("redisagg: incident snapshots: %w", err)
	}
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		out[k] = []byte(v)
	}
	return out, nil
}

// ClaimPrefix starts the keys of webhook events claimed fleet-wide. A
// claim names an event by its type and a rule's name or a rules hash,
// never an account.
const ClaimPrefix = "guardian:v1:{webhook}:claim:"

// SpentPrefix starts the keys of the gateway's spent challenges and passes,
// claimed fleet-wide: each names a solution by its random id, nothing of
// the account or the client.
const SpentPrefix = "guardian:v1:{gateway}:"

// Claims is a webhook.Claimer (and the gateway's) on Redis: a claim is one
// SET NX PX under its prefix. It holds no state and is safe for concurrent
// use.
type Claims struct {
	c      redis.UniversalClient
	prefix string
}

var _ webhook.Claimer = (*Claims)(nil)

// NewClaims returns the webhook events' Claims on c, which the caller
// keeps and closes.
func NewClaims(c redis.UniversalClient) *Claims { return &Claims{c: c, prefix: ClaimPrefix} }

// NewSpent returns the Claims of the gateway's spent solutions on c, which
// the caller keeps and closes.
func NewSpent(c redis.UniversalClient) *Claims { return &Claims{c: c, prefix: SpentPrefix} }

// Claim sets the claim of name for ttl unless it is set, and reports
// whether this call set it.
func (s *Claims) Claim(ctx context.Context, name string, ttl time.Duration) (bool, error) {
	ok, err := s.c.SetNX(ctx, s.prefix+name, "1", ttl).Result()
	if err != nil {
		return false, fmt.Errorf("redisagg: claim: %w", err)
	}
	return ok, nil
}
