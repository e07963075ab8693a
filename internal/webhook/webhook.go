// Package webhook sends guardian's events to the receivers an operator
// names (--webhook-url), as JSON POSTs signed as the Standard Webhooks
// specification says (webhook-id, webhook-timestamp, webhook-signature).
//
// Delivery is at least once: each receiver has a bounded queue (1,000
// events by default) and one sender, which posts the events in order and
// retries the one at its head with exponential backoff (1 s doubling to 5
// min) for MaxAge (3 h by default) before it gives it up. Notify never
// blocks: an event that finds a queue full is dropped for that receiver.
// guardian_webhook_events_total{event, result} counts each delivery, each
// retry and each event dropped (a full queue, or given up after MaxAge). So
// a receiver that hangs or answers 500 slows no check; its queue fills and
// what does not fit is counted.
//
// In a fleet, an event every instance sees (a rules reload, the global
// challenge starting) carries a Dedupe name: the instance that claims it
// first in the store (Claimer, a SET NX with a TTL) sends it, the others
// do not. An event that happens on one instance (a hard stop, a reset, a
// list change, that instance's fallback) has none and is sent by it. A
// claim the store cannot answer sends the event anyway: at least once.
//
// Events name accounts by pseudonyms only, never in clear.
package webhook

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// The events guardian sends.
const (
	HardStopStarted        = "hard_stop_started"
	HardStopEnded          = "hard_stop_ended"
	AccountReset           = "account_reset"
	GlobalChallengeStarted = "global_challenge_started"
	GlobalChallengeEnded   = "global_challenge_ended"
	FallbackStarted        = "fallback_started"
	FallbackEnded          = "fallback_ended"
	RulesReloaded          = "rules_reloaded"
	ListChanged            = "list_changed"
)

// The results guardian_webhook_events_total counts.
const (
	ResultDelivered = "delivered"
	ResultRetried   = "retried"
	ResultDropped   = "dropped"
)

// Event is one event to send.
type Event struct {
	// Type is one of the event constants.
	Type string
	// Data is the event's fields: pseudonyms, rule names, the instance;
	// never an identifier in clear.
	Data map[string]string
	// Dedupe, when set, names the event fleet-wide: only the instance
	// that claims it first sends it (Config.Claim).
	Dedupe string
}

// Claimer claims an event's Dedupe name for ttl, fleet-wide, and reports
// whether this caller got it. Package redisagg implements it on Redis.
type Claimer interface {
	Claim(ctx context.Context, name string, ttl time.Duration) (bool, error)
}

// Defaults of a Config's zero fields.
const (
	DefaultQueue   = 1000
	DefaultMaxAge  = 3 * time.Hour
	DefaultTimeout = 10 * time.Second
	firstRetry     = time.Second
	maxRetry       = 5 * time.Minute
	// claimTTL is how long a Dedupe name stays claimed: the instances of
	// a fleet see one change within it, and the same change again after
	// it is sent again.
	claimTTL = time.Minute
	// intake is the queue between Notify and the dispatcher.
	intake = 4096
)

// Config configures a Notifier. URLs and Key are required.
type Config struct {
	URLs []string
	// Key signs every message (ParseSecret).
	Key []byte
	// Queue bounds each receiver's queue (default 1000).
	Queue int
	// MaxAge is how long an event is retried before it is given up
	// (default 3h).
	MaxAge time.Duration
	// FirstRetry is the wait before the first retry, doubled after each
	// up to MaxRetry (defaults 1s and 5min).
	FirstRetry, MaxRetry time.Duration
	// Client posts the events (default: a client with a 10 s timeout).
	Client *http.Client
	// Claim dedupes events fleet-wide; nil: every event is sent.
	Claim Claimer
	// Registerer registers guardian_webhook_events_total (default: a
	// registry of the Notifier's own).
	Registerer prometheus.Registerer
	// Now is the clock of timestamps and ages (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// message is an event as a receiver gets it, with its id and when it was
// queued.
type message struct {
	event string
	id    string
	body  []byte
	at    time.Time
}

// Notifier sends events to the receivers. It is safe for concurrent use;
// build one with New, Start it, Close it.
type Notifier struct {
	cfg       Config
	log       *slog.Logger
	events    *prometheus.CounterVec
	in        chan queued
	receivers []*receiver
	stop      chan struct{}
	// ctx ends on Close, and with it a post in flight.
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// queued is an Event on its way to the dispatcher.
type queued struct {
	ev Event
	at time.Time
}

// New returns a Notifier for cfg, not started.
func New(cfg Config) *Notifier {
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultQueue
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = DefaultMaxAge
	}
	if cfg.FirstRetry <= 0 {
		cfg.FirstRetry = firstRetry
	}
	if cfg.MaxRetry <= 0 {
		cfg.MaxRetry = maxRetry
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: DefaultTimeout}
	}
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	n := &Notifier{cfg: cfg, log: cfg.Logger, in: make(chan queued, intake), stop: make(chan struct{})}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	if n.log == nil {
		n.log = slog.Default()
	}
	n.events = promauto.With(cfg.Registerer).NewCounterVec(prometheus.CounterOpts{
		Name: "guardian_webhook_events_total",
		Help: "Webhook events by event and result: delivered to a receiver, retried after a failed attempt, or dropped (a receiver's queue full, or given up after retrying).",
	}, []string{"event", "result"})
	for _, u := range cfg.URLs {
		n.receivers = append(n.receivers, &receiver{n: n, url: u, queue: make(chan message, cfg.Queue)})
	}
	return n
}

// Start runs the dispatcher and one sender per receiver in the background.
func (n *Notifier) Start() {
	n.wg.Go(n.dispatch)
	for _, r := range n.receivers {
		n.wg.Go(r.send)
	}
}

// Close stops the Notifier: what is queued and not yet delivered is lost
// (at least once holds while guardian runs), and a post in flight is
// cancelled. It waits for the senders to stop until ctx ends.
func (n *Notifier) Close(ctx context.Context) error {
	n.closeOnce.Do(func() {
		close(n.stop)
		n.cancel()
	})
	done := make(chan struct{})
	go func() { n.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("webhook: close: %w", ctx.Err())
	}
}

// Notify queues ev for every receiver and returns at once: it never
// blocks, whatever the receivers do. An event that finds the intake full
// is dropped, and counted, for every receiver.
func (n *Notifier) Notify(ev Event) {
	select {
	case n.in <- queued{ev: ev, at: n.cfg.Now()}:
	default:
		n.events.WithLabelValues(ev.Type, ResultDropped).Add(float64(len(n.receivers)))
	}
}

// dispatch claims each event, when it has a Dedupe name, and hands it to
// every receiver's queue, until Close.
func (n *Notifier) dispatch() {
	for {
		select {
		case <-n.stop:
			return
		case q := <-n.in:
			if !n.claim(q.ev) {
				continue
			}
			m, err := n.message(q)
			if err != nil {
				n.log.Error("webhook: an event could not be encoded", "event", q.ev.Type, "err", err)
				continue
			}
			for _, r := range n.receivers {
				r.enqueue(m)
			}
		}
	}
}

// claim reports whether this instance sends ev: it has no Dedupe name, or
// this instance claimed it, or the claim could not be asked.
func (n *Notifier) claim(ev Event) bool {
	if ev.Dedupe == "" || n.cfg.Claim == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ok, err := n.cfg.Claim.Claim(ctx, ev.Type+":"+ev.Dedupe, claimTTL)
	if err != nil {
		n.log.Warn("webhook: could not claim an event in the store; sending it anyway", "event", ev.Type, "err", err)
		return true
	}
	return ok
}

// payload is a message's body.
type payload struct {
	Type      string            `json:"type"`
	Timestamp time.Time         `json:"timestamp"`
	Data      map[string]string `json:"data"`
}

// message encodes q with an id of its own, the same for every receiver
// and every retry.
func (n *Notifier) message(q queued) (message, error) {
	data := q.ev.Data
	if data == nil {
		data = map[string]string{}
	}
	body, err := json.Marshal(payload{Type: q.ev.Type, Timestamp: q.at.UTC(), Data: data})
	if err != nil {
		return message{}, err
	}
	return message{event: q.ev.Type, id: "msg_" + rand.Text(), body: body, at: q.at}, nil
}

// receiver is one URL's queue and sender.
type receiver struct {
	n     *Notifier
	url   string
	queue chan message
}

// enqueue queues m, or drops and counts it when the queue is full.
func (r *receiver) enqueue(m message) {
	select {
	case r.queue <- m:
	default:
		r.n.events.WithLabelValues(m.event, ResultDropped).Inc()
	}
}

// send posts the queued messages in order until Close, each retried until
// it is delivered or MaxAge old.
func (r *receiver) send() {
	for {
		select {
		case <-r.n.stop:
			return
		case m := <-r.queue:
			if !r.deliver(m) {
				return
			}
		}
	}
}

// deliver posts m until it is delivered, given up or Close; it reports
// false on Close.
func (r *receiver) deliver(m message) bool {
	wait := r.n.cfg.FirstRetry
	for {
		err := r.post(m)
		if err == nil {
			r.n.events.WithLabelValues(m.event, ResultDelivered).Inc()
			return true
		}
		if r.n.cfg.Now().Sub(m.at)+wait > r.n.cfg.MaxAge {
			r.n.events.WithLabelValues(m.event, ResultDropped).Inc()
			r.n.log.Warn("webhook: event given up after retrying", "event", m.event, "id", m.id, "receiver", r.url, "err", err)
			return true
		}
		r.n.events.WithLabelValues(m.event, ResultRetried).Inc()
		select {
		case <-r.n.stop:
			return false
		case <-time.After(wait):
		}
		wait = min(2*wait, r.n.cfg.MaxRetry)
	}
}

// errStatus is the error of an answer outside 2xx.
var errStatus = errors.New("webhook: the receiver answered")

// post posts m once, signed as of now.
func (r *receiver) post(m message) error {
	ts := r.n.cfg.Now().Unix()
	ctx, cancel := context.WithTimeout(r.n.ctx, DefaultTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(m.body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "guardian-webhook")
	req.Header.Set("webhook-id", m.id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", Sign(r.n.cfg.Key, m.id, ts, m.body))
	resp, err := r.n.cfg.Client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("%w %d", errStatus, resp.StatusCode)
	}
	return nil
}
