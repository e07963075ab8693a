package incident

import (
	"cmp"
	"slices"
	"time"

	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/shadow"
)

// Snapshot is one instance's Book as the fleet shares it through the
// store. It names keys and accounts by hashed subjects only.
type Snapshot struct {
	Instance  string     `json:"instance"`
	At        time.Time  `json:"at"`
	Buckets   []Bucket   `json:"buckets,omitempty"`
	Top       []TopKeys  `json:"top,omitempty"`
	HardStops []HardStop `json:"hard_stops,omitempty"`
	Global    []Global   `json:"global,omitempty"`
}

// Bucket is the counts of one BucketWidth starting at Start (Unix
// seconds).
type Bucket struct {
	Start  int64   `json:"start"`
	Checks uint64  `json:"checks"`
	Counts []Count `json:"counts,omitempty"`
}

// Count is how many checks a rule decided so in one bucket.
type Count struct {
	Rule     string       `json:"rule"`
	Decision rules.Action `json:"decision"`
	N        uint64       `json:"n"`
}

// TopKeys is the keys a rule stopped most with one decision.
type TopKeys struct {
	Rule     string            `json:"rule"`
	Decision rules.Action      `json:"decision"`
	Keys     []shadow.KeyCount `json:"keys"`
}

// sort puts s in a canonical order, so equal snapshots encode equally.
func (s *Snapshot) sort() {
	slices.SortFunc(s.Buckets, func(x, y Bucket) int { return cmp.Compare(x.Start, y.Start) })
	for i := range s.Buckets {
		slices.SortFunc(s.Buckets[i].Counts, func(x, y Count) int { return cmp.Or(cmp.Compare(x.Rule, y.Rule), cmp.Compare(x.Decision, y.Decision)) })
	}
	slices.SortFunc(s.Top, func(x, y TopKeys) int {
		return cmp.Or(cmp.Compare(x.Rule, y.Rule), cmp.Compare(x.Decision, y.Decision))
	})
	slices.SortFunc(s.HardStops, func(x, y HardStop) int { return y.StartedAt.Compare(x.StartedAt) })
	slices.SortFunc(s.Global, func(x, y Global) int { return cmp.Compare(x.Rule, y.Rule) })
}

// View is the incident view, GET /v1/incident.
type View struct {
	GeneratedAt time.Time `json:"generated_at"`
	// Fleet says whose figures these are.
	Fleet FleetState `json:"fleet"`
	// WindowSeconds and BucketSeconds are the span of the figures and of
	// one point of Series.
	WindowSeconds int `json:"window_seconds"`
	BucketSeconds int `json:"bucket_seconds"`
	// ChecksPerSecond is every check decided, averaged over the window.
	ChecksPerSecond float64 `json:"checks_per_second"`
	// Decisions are the enforced decisions by decision and rule, most
	// first; never nil.
	Decisions []Rate `json:"decisions"`
	// Series is the checks and enforced decisions of each bucket of the
	// window, oldest first; never nil.
	Series []Point `json:"series"`
	// TopKeys are the keys enforced rules stopped most, as pseudonyms;
	// never nil.
	TopKeys []TopKeys `json:"top_keys"`
	// HardStops are the accounts hard-stopped in the last 24 hours, as
	// pseudonyms, the latest first; never nil.
	HardStops []HardStopView `json:"hard_stops"`
	// GlobalChallenge is each failure_rate rule's state; never nil.
	GlobalChallenge []GlobalView `json:"global_challenge"`
	// Instances are each instance's own figures over the window; never
	// nil.
	Instances []InstanceFigures `json:"instances"`
}

// FleetState says whether the figures are the fleet's.
type FleetState struct {
	// Available is false while the store cannot be read: the figures are
	// then this instance's alone.
	Available bool `json:"available"`
	// Shared is false on the embedded store, which no instance shares.
	Shared bool `json:"shared"`
	// Instances counts the instances whose figures are summed.
	Instances int `json:"instances"`
}

// Rate is one rule's decisions of one kind over the window.
type Rate struct {
	Rule     string       `json:"rule"`
	Decision rules.Action `json:"decision"`
	Total    uint64       `json:"total"`
	// PerSecond is Total over the window; LastMinutePerSecond, over the
	// last minute.
	PerSecond           float64 `json:"per_second"`
	LastMinutePerSecond float64 `json:"last_minute_per_second"`
}

// Point is one bucket of the window.
type Point struct {
	Start     time.Time `json:"start"`
	Checks    uint64    `json:"checks"`
	Slow      uint64    `json:"slow"`
	Block     uint64    `json:"block"`
	Challenge uint64    `json:"challenge"`
}

// HardStopView is a hard stop as the view shows it.
type HardStopView struct {
	Account string `json:"account"`
	// Tenant is the account's tenant, absent for the default one.
	Tenant    string     `json:"tenant,omitempty"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at"`
}

// GlobalView is a failure_rate rule's state across the fleet: in force
// when it is on any instance.
type GlobalView struct {
	Rule    string    `json:"rule"`
	InForce bool      `json:"in_force"`
	Since   time.Time `json:"since"`
	// Instances counts the instances that have it in force.
	Instances int `json:"instances"`
}

// InstanceFigures is one instance's own figures over the window.
type InstanceFigures struct {
	ID       string `json:"id"`
	Checks   uint64 `json:"checks"`
	Enforced uint64 `json:"enforced"`
}

// merge builds the view of snaps at now, naming subjects with name.
func merge(snaps []Snapshot, now time.Time, name func(string) string) View {
	v := View{GeneratedAt: now.UTC(), WindowSeconds: int(Window / time.Second), BucketSeconds: int(BucketWidth / time.Second),
		Decisions: []Rate{}, TopKeys: []TopKeys{}, HardStops: []HardStopView{}, GlobalChallenge: []GlobalView{}, Instances: []InstanceFigures{}}
	v.Fleet.Instances = len(snaps)
	v.Series = series(snaps, now)
	v.Decisions = rates(snaps, now)
	var checks uint64
	for _, s := range snaps {
		f := InstanceFigures{ID: s.Instance}
		for _, b := range s.Buckets {
			f.Checks += b.Checks
			for _, c := range b.Counts {
				f.Enforced += c.N
			}
		}
		checks += f.Checks
		v.Instances = append(v.Instances, f)
	}
	v.ChecksPerSecond = float64(checks) / Window.Seconds()
	v.TopKeys = topKeys(snaps, name)
	v.HardStops = hardStops(snaps, now, name)
	v.GlobalChallenge = globals(snaps)
	return v
}

// series sums the buckets of snaps into one point per bucket of the
// window ending at now.
func series(snaps []Snapshot, now time.Time) []Point {
	width := int64(BucketWidth / time.Second)
	last := now.Unix() - now.Unix()%width
	first := last - int64(buckets-1)*width
	out := make([]Point, buckets)
	for i := range out {
		out[i].Start = time.Unix(first+int64(i)*width, 0).UTC()
	}
	for _, s := range snaps {
		for _, b := range s.Buckets {
			if b.Start < first || b.Start > last {
				continue
			}
			p := &out[(b.Start-first)/width]
			p.Checks += b.Checks
			for _, c := range b.Counts {
				switch c.Decision {
				case rules.Slow:
					p.Slow += c.N
				case rules.Block:
					p.Block += c.N
				case rules.Challenge:
					p.Challenge += c.N
				}
			}
		}
	}
	return out
}

// rates sums the counts of snaps by rule and decision.
func rates(snaps []Snapshot, now time.Time) []Rate {
	recent := now.Add(-time.Minute).Unix()
	by := map[cell]*Rate{}
	for _, s := range snaps {
		for _, b := range s.Buckets {
			for _, c := range b.Counts {
				r := by[cell{c.Rule, c.Decision}]
				if r == nil {
					r = &Rate{Rule: c.Rule, Decision: c.Decision}
					by[cell{c.Rule, c.Decision}] = r
				}
				r.Total += c.N
				if b.Start >= recent {
					r.LastMinutePerSecond += float64(c.N)
				}
			}
		}
	}
	out := make([]Rate, 0, len(by))
	for _, r := range by {
		r.PerSecond = float64(r.Total) / Window.Seconds()
		r.LastMinutePerSecond /= time.Minute.Seconds()
		out = append(out, *r)
	}
	slices.SortFunc(out, func(x, y Rate) int {
		return cmp.Or(cmp.Compare(y.Total, x.Total), cmp.Compare(x.Rule, y.Rule), cmp.Compare(x.Decision, y.Decision))
	})
	return out
}

// topKeys sums the top keys of snaps by rule and decision, named.
func topKeys(snaps []Snapshot, name func(string) string) []TopKeys {
	sum := map[cell]map[string]uint64{}
	for _, s := range snaps {
		for _, t := range s.Top {
			m := sum[cell{t.Rule, t.Decision}]
			if m == nil {
				m = map[string]uint64{}
				sum[cell{t.Rule, t.Decision}] = m
			}
			for _, k := range t.Keys {
				m[k.Key] += k.Hits
			}
		}
	}
	out := make([]TopKeys, 0, len(sum))
	for c, m := range sum {
		keys := keyCounts(m, reportedKeys)
		for i := range keys {
			keys[i].Key = name(keys[i].Key)
		}
		out = append(out, TopKeys{Rule: c.rule, Decision: c.decision, Keys: keys})
	}
	slices.SortFunc(out, func(x, y TopKeys) int {
		return cmp.Or(cmp.Compare(x.Rule, y.Rule), cmp.Compare(x.Decision, y.Decision))
	})
	return out
}

// hardStops merges the hard stops of snaps, one per account: the latest
// start, ended when an instance saw it end after that start.
func hardStops(snaps []Snapshot, now time.Time, name func(string) string) []HardStopView {
	by := map[string]HardStop{}
	for _, s := range snaps {
		for _, h := range s.HardStops {
			if now.Sub(h.StartedAt) >= HardStopWindow {
				continue
			}
			cur, ok := by[h.Subject]
			switch {
			case !ok || h.StartedAt.After(cur.StartedAt):
				if ok && cur.EndedAt != nil && cur.EndedAt.After(h.StartedAt) {
					h.EndedAt = cur.EndedAt
				}
				by[h.Subject] = h
			case h.EndedAt != nil && h.EndedAt.After(cur.StartedAt) && (cur.EndedAt == nil || h.EndedAt.After(*cur.EndedAt)):
				cur.EndedAt = h.EndedAt
				by[h.Subject] = cur
			}
		}
	}
	out := make([]HardStopView, 0, len(by))
	for s, h := range by {
		out = append(out, HardStopView{Account: name(s), Tenant: h.Tenant, StartedAt: h.StartedAt, EndedAt: h.EndedAt})
	}
	slices.SortFunc(out, func(x, y HardStopView) int {
		return cmp.Or(y.StartedAt.Compare(x.StartedAt), cmp.Compare(x.Account, y.Account))
	})
	return out
}

// globals merges the failure_rate rules' states of snaps: a rule is in
// force while any instance has it so, since the earliest of those.
func globals(snaps []Snapshot) []GlobalView {
	by := map[string]*GlobalView{}
	for _, s := range snaps {
		for _, g := range s.Global {
			v := by[g.Rule]
			if v == nil {
				v = &GlobalView{Rule: g.Rule, Since: g.Since}
				by[g.Rule] = v
			}
			switch {
			case g.InForce && !v.InForce:
				v.InForce, v.Since = true, g.Since
			case g.InForce == v.InForce && g.Since.Before(v.Since) == g.InForce:
				v.Since = g.Since
			}
			if g.InForce {
				v.Instances++
			}
		}
	}
	out := make([]GlobalView, 0, len(by))
	for _, v := range by {
		out = append(out, *v)
	}
	slices.SortFunc(out, func(x, y GlobalView) int { return cmp.Compare(x.Rule, y.Rule) })
	return out
}
