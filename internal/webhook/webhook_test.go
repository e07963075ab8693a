package webhook_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/guardian-sec/guardian/internal/webhook"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestSignMatchesTheSpecification reproduces the Standard Webhooks
// specification's published signature.
func TestSignMatchesTheSpecification(t *testing.T) {
	key, err := webhook.ParseSecret(secret + "\n")
	if err != nil {
		t.Fatal(err)
	}
	got := webhook.Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("Sign = %q, want %q", got, want)
	}
	for _, bad := range []string{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_not base64!", "whsec_c2hvcnQ="} {
		if _, err := webhook.ParseSecret(bad); !errors.Is(err, webhook.ErrSecret) {
			t.Errorf("ParseSecret(%q): %v, want ErrSecret", bad, err)
		}
	}
}

// delivery is one request a receiver got.
type delivery struct {
	header http.Header
	body   []byte
}

// receiver is a real HTTP receiver: it answers each request with
// answer(n), n counting from 1, and keeps what it got.
type receiver struct {
	mu     sync.Mutex
	got    []delivery
	answer func(n int) int
	srv    *httptest.Server
}

func newReceiver(t *testing.T, answer func(n int) int) *receiver {
	r := &receiver{answer: answer}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, delivery{req.Header.Clone(), b})
		n := len(r.got)
		r.mu.Unlock()
		w.WriteHeader(r.answer(n))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

// verify checks d's signature as a receiver would, with crypto/hmac alone.
func verify(t *testing.T, d delivery) {
	t.Helper()
	key, _ := base64.StdEncoding.DecodeString(secret[len("whsec_"):])
	id, ts := d.header.Get("webhook-id"), d.header.Get("webhook-timestamp")
	if _, err := strconv.ParseInt(ts, 10, 64); err != nil || id == "" {
		t.Fatalf("webhook-id %q, webhook-timestamp %q", id, ts)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "." + string(d.body)))
	want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	if got := d.header.Get("webhook-signature"); !hmac.Equal([]byte(got), []byte(want)) {
		t.Errorf("webhook-signature %q, want %q", got, want)
	}
}

// start returns a started Notifier to urls, stopped when t ends, and its
// registry.
func start(t *testing.T, cfg webhook.Config) (*webhook.Notifier, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	key, err := webhook.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Key, cfg.Registerer, cfg.Logger = key, reg, quiet
	if cfg.FirstRetry == 0 {
		cfg.FirstRetry, cfg.MaxRetry = 10*time.Millisecond, 40*time.Millisecond
	}
	n := webhook.New(cfg)
	n.Start()
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	return n, reg
}

// count returns guardian_webhook_events_total{event, result}.
func count(t *testing.T, reg *prometheus.Registry, event, result string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["event"] == event && labels["result"] == result {
				return int(m.GetCounter().GetValue())
			}
		}
	}
	return 0
}

// eventually polls cond every 5ms for up to 10s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
	}
}

func TestEventsArriveSigned(t *testing.T) {
	a := newReceiver(t, func(int) int { return http.StatusNoContent })
	b := newReceiver(t, func(int) int { return http.StatusOK })
	n, reg := start(t, webhook.Config{URLs: []string{a.srv.URL, b.srv.URL}})
	n.Notify(webhook.Event{Type: webhook.HardStopStarted, Data: map[string]string{"account": "h-ohjXXnIYOeEQCt9ExlRekQ"}})
	n.Notify(webhook.Event{Type: webhook.RulesReloaded, Data: map[string]string{"hash": "3f9a0c6be12d7a44"}})
	eventually(t, "two events at each receiver", func() bool { return len(a.deliveries()) == 2 && len(b.deliveries()) == 2 })
	for i, d := range a.deliveries() {
		verify(t, d)
		var p struct {
			Type      string            `json:"type"`
			Timestamp time.Time         `json:"timestamp"`
			Data      map[string]string `json:"data"`
		}
		if err := json.Unmarshal(d.body, &p); err != nil {
			t.Fatal(err)
		}
		if want := []string{webhook.HardStopStarted, webhook.RulesReloaded}[i]; p.Type != want || p.Timestamp.IsZero() || len(p.Data) != 1 {
			t.Errorf("event %d: %s, want a %s with its data", i, d.body, want)
		}
		if d.header.Get("Content-Type") != "application/json" {
			t.Errorf("Content-Type %q", d.header.Get("Content-Type"))
		}
		// Both receivers get one message: one id.
		if other := b.deliveries()[i]; other.header.Get("webhook-id") != d.header.Get("webhook-id") {
			t.Errorf("event %d: ids %q and %q at the two receivers", i, d.header.Get("webhook-id"), other.header.Get("webhook-id"))
		}
	}
	if got := count(t, reg, webhook.HardStopStarted, webhook.ResultDelivered); got != 2 {
		t.Errorf("delivered hard_stop_started %d, want 2", got)
	}
}

// TestDeadReceiverIsRetried answers 500 three times, then takes the
// event: it arrives, with the same id, signed anew.
func TestDeadReceiverIsRetried(t *testing.T) {
	r := newReceiver(t, func(n int) int {
		if n <= 3 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	n, reg := start(t, webhook.Config{URLs: []string{r.srv.URL}})
	n.Notify(webhook.Event{Type: webhook.FallbackStarted, Data: map[string]string{"instance": "a"}})
	eventually(t, "the event delivered", func() bool { return count(t, reg, webhook.FallbackStarted, webhook.ResultDelivered) == 1 })
	got := r.deliveries()
	if len(got) != 4 || count(t, reg, webhook.FallbackStarted, webhook.ResultRetried) != 3 {
		t.Fatalf("%d attempts, %d retries counted; want 4 and 3", len(got), count(t, reg, webhook.FallbackStarted, webhook.ResultRetried))
	}
	for _, d := range got {
		verify(t, d)
		if d.header.Get("webhook-id") != got[0].header.Get("webhook-id") {
			t.Errorf("a retry has id %q, the first attempt %q", d.header.Get("webhook-id"), got[0].header.Get("webhook-id"))
		}
	}
}

// TestUnreachableReceiverComesBack: nothing listens at first; the event
// arrives once a receiver does.
func TestUnreachableReceiverComesBack(t *testing.T) {
	r := newReceiver(t, func(int) int { return http.StatusOK })
	url := r.srv.URL
	r.srv.Close()
	n, reg := start(t, webhook.Config{URLs: []string{url}})
	n.Notify(webhook.Event{Type: webhook.GlobalChallengeStarted, Data: map[string]string{"rule": "login-global"}})
	eventually(t, "a retry", func() bool { return count(t, reg, webhook.GlobalChallengeStarted, webhook.ResultRetried) >= 2 })
	back := newReceiverAt(t, url)
	eventually(t, "the event delivered", func() bool { return count(t, reg, webhook.GlobalChallengeStarted, webhook.ResultDelivered) == 1 })
	if got := back.deliveries(); len(got) != 1 {
		t.Fatalf("%d deliveries once back, want 1", len(got))
	}
	verify(t, back.deliveries()[0])
}

// newReceiverAt serves a receiver answering 200 at url's address.
func newReceiverAt(t *testing.T, url string) *receiver {
	t.Helper()
	r := &receiver{answer: func(int) int { return http.StatusOK }}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, delivery{req.Header.Clone(), b})
		r.mu.Unlock()
	}))
	ln, err := listen(url)
	if err != nil {
		t.Fatalf("listen again at the closed receiver's address: %v", err)
	}
	r.srv.Listener = ln
	r.srv.Start()
	t.Cleanup(r.srv.Close)
	return r
}

// TestFullQueueDropsAndCounts holds a receiver on its first event: Notify
// never waits, the queue holds what fits, and the rest is dropped and
// counted, exactly.
func TestFullQueueDropsAndCounts(t *testing.T) {
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	r := newReceiver(t, func(n int) int {
		if n == 1 {
			held <- struct{}{}
			<-release
		}
		return http.StatusOK
	})
	n, reg := start(t, webhook.Config{URLs: []string{r.srv.URL}, Queue: 2})
	ev := webhook.Event{Type: webhook.ListChanged, Data: map[string]string{"action": "add"}}
	n.Notify(ev)
	<-held
	// The receiver hangs; 9 more events: 2 fit the queue, 7 are dropped.
	for range 9 {
		n.Notify(ev)
	}
	eventually(t, "7 dropped", func() bool { return count(t, reg, webhook.ListChanged, webhook.ResultDropped) == 7 })
	close(release)
	eventually(t, "3 delivered", func() bool { return count(t, reg, webhook.ListChanged, webhook.ResultDelivered) == 3 })
	if got := count(t, reg, webhook.ListChanged, webhook.ResultDropped); got != 7 {
		t.Errorf("dropped %d, want 7", got)
	}
	if got := len(r.deliveries()); got != 3 {
		t.Errorf("%d deliveries, want 3", got)
	}
}

// TestGivenUpAfterMaxAge drops an event its receiver refuses for longer
// than MaxAge.
func TestGivenUpAfterMaxAge(t *testing.T) {
	r := newReceiver(t, func(int) int { return http.StatusServiceUnavailable })
	n, reg := start(t, webhook.Config{URLs: []string{r.srv.URL}, MaxAge: 50 * time.Millisecond})
	n.Notify(webhook.Event{Type: webhook.AccountReset})
	eventually(t, "given up", func() bool { return count(t, reg, webhook.AccountReset, webhook.ResultDropped) == 1 })
	if got := count(t, reg, webhook.AccountReset, webhook.ResultDelivered); got != 0 {
		t.Errorf("delivered %d", got)
	}
}

// claims is a Claimer in memory.
type claims struct {
	mu  sync.Mutex
	got map[string]bool
}

func (c *claims) Claim(_ context.Context, name string, _ time.Duration) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.got[name] {
		return false, nil
	}
	c.got[name] = true
	return true, nil
}

// TestFleetSendsAnEventOnce: two instances see one reload; the one that
// claims it sends it.
func TestFleetSendsAnEventOnce(t *testing.T) {
	r := newReceiver(t, func(int) int { return http.StatusOK })
	c := &claims{got: map[string]bool{}}
	a, regA := start(t, webhook.Config{URLs: []string{r.srv.URL}, Claim: c})
	b, regB := start(t, webhook.Config{URLs: []string{r.srv.URL}, Claim: c})
	reload := webhook.Event{Type: webhook.RulesReloaded, Dedupe: "3f9a0c6be12d7a44"}
	a.Notify(reload)
	b.Notify(reload)
	// Events of one instance each are sent by both.
	a.Notify(webhook.Event{Type: webhook.FallbackStarted, Data: map[string]string{"instance": "a"}})
	b.Notify(webhook.Event{Type: webhook.FallbackStarted, Data: map[string]string{"instance": "b"}})
	// Each Notifier dispatches in order: once both fallback events are
	// in, both have settled the reload.
	eventually(t, "three deliveries", func() bool { return len(r.deliveries()) == 3 })
	if got := count(t, regA, webhook.RulesReloaded, webhook.ResultDelivered) + count(t, regB, webhook.RulesReloaded, webhook.ResultDelivered); got != 1 || len(r.deliveries()) != 3 {
		t.Errorf("the reload delivered %d times, %d deliveries in all; want once, 3", got, len(r.deliveries()))
	}
}
