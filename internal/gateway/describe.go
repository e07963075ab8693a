package gateway

// View is a proxy file as GET /v1/proxies shows it: every proxy and route
// with its settings, in the proxy file's own terms.
type View struct {
	Source  string      `json:"source"`
	Proxies []ProxyView `json:"proxies"`
}

// ProxyView is one proxy of a View. Addr is where it listens once started.
type ProxyView struct {
	Listen         string      `json:"listen"`
	Addr           string      `json:"addr,omitempty"`
	Upstream       string      `json:"upstream"`
	Mode           Mode        `json:"mode"`
	Tenant         string      `json:"tenant,omitempty"`
	TrustedProxies []string    `json:"trusted_proxies"`
	Routes         []RouteView `json:"routes"`
}

// RouteView is one route of a ProxyView.
type RouteView struct {
	Name      string            `json:"name"`
	Match     MatchView         `json:"match"`
	Flow      string            `json:"flow"`
	Account   map[string]string `json:"account"`
	Secret    map[string]string `json:"secret,omitempty"`
	Outcome   OutcomeView       `json:"outcome"`
	Challenge ChallengeView     `json:"challenge"`
	Breached  *BreachedView     `json:"breached,omitempty"`
}

// MatchView is a route's match; Methods is [any] when it matches any.
type MatchView struct {
	Path       string   `json:"path,omitempty"`
	PathPrefix string   `json:"path_prefix,omitempty"`
	Methods    []string `json:"methods"`
}

// OutcomeView is a route's outcome lists.
type OutcomeView struct {
	Failure []MatcherView `json:"failure"`
	Success []MatcherView `json:"success"`
}

// MatcherView is one item of an outcome list.
type MatcherView struct {
	Status         []int   `json:"status,omitempty"`
	LocationPrefix string  `json:"location_prefix,omitempty"`
	SetCookie      string  `json:"set_cookie,omitempty"`
	BodyContains   *string `json:"body_contains,omitempty"`
	BodyLacks      *string `json:"body_lacks,omitempty"`
}

// ChallengeView is a route's challenge.
type ChallengeView struct {
	Type       ChallengeType `json:"type"`
	Difficulty int           `json:"difficulty,omitempty"`
	Status     int           `json:"status,omitempty"`
}

// BreachedView is a route's breached option.
type BreachedView struct {
	OnLogin BreachedAction `json:"on_login"`
}

// View returns the gateway's proxies as GET /v1/proxies shows them.
func (g *Gateway) View() View {
	v := View{Source: g.file.Source, Proxies: make([]ProxyView, len(g.file.Proxies))}
	addrs := g.Addrs()
	for i := range g.file.Proxies {
		p := &g.file.Proxies[i]
		pv := ProxyView{Listen: p.Listen, Upstream: p.Upstream.Redacted(), Mode: p.Mode, Tenant: p.Tenant, TrustedProxies: []string{}, Routes: make([]RouteView, len(p.Routes))}
		if i < len(addrs) {
			pv.Addr = addrs[i]
		}
		for _, pf := range p.TrustedProxies {
			pv.TrustedProxies = append(pv.TrustedProxies, pf.String())
		}
		for j := range p.Routes {
			pv.Routes[j] = routeView(&p.Routes[j])
		}
		v.Proxies[i] = pv
	}
	return v
}

func routeView(r *Route) RouteView {
	rv := RouteView{
		Name:    r.Name,
		Match:   MatchView{Path: r.Path, PathPrefix: r.PathPrefix, Methods: r.Methods},
		Flow:    string(r.Flow),
		Account: map[string]string{string(r.Account.Source): r.Account.Name},
		Outcome: OutcomeView{Failure: matcherViews(r.Failure), Success: matcherViews(r.Success)},
	}
	if rv.Match.Methods == nil {
		rv.Match.Methods = []string{"any"}
	}
	if !r.Secret.IsZero() {
		rv.Secret = map[string]string{string(r.Secret.Source): r.Secret.Name}
	}
	switch c := r.Challenge; c.Type {
	case StatusOnly:
		rv.Challenge = ChallengeView{Type: StatusOnly, Status: c.Status}
	default:
		d := c.Difficulty
		if d == 0 {
			d = DefaultDifficulty
		}
		rv.Challenge = ChallengeView{Type: ProofOfWork, Difficulty: d}
	}
	if r.Breached != "" {
		rv.Breached = &BreachedView{OnLogin: r.Breached}
	}
	return rv
}

func matcherViews(ms []Matcher) []MatcherView {
	out := make([]MatcherView, len(ms))
	for i, m := range ms {
		out[i] = MatcherView{Status: m.Status, LocationPrefix: m.LocationPrefix, SetCookie: m.SetCookie}
		if m.HasBodyContains {
			out[i].BodyContains = &ms[i].BodyContains
		}
		if m.HasBodyLacks {
			out[i].BodyLacks = &ms[i].BodyLacks
		}
	}
	return out
}
