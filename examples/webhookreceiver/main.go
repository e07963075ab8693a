// Command webhookreceiver receives guardian's webhooks: it verifies each
// signature as the Standard Webhooks specification says, refuses a message
// older or newer than 5 minutes, and writes each event as one line, for a
// chat or a pager to pick up. It uses the standard library alone, so it can
// be copied as it is.
//
//	WEBHOOK_SECRET_FILE=secret go run ./examples/webhookreceiver -addr :9000
//	guardian serve --webhook-url http://localhost:9000/ --webhook-secret-file secret …
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// tolerance is how far a message's timestamp may be from now: older ones
// are replays.
const tolerance = 5 * time.Minute

func main() {
	addr := flag.String("addr", ":9000", "listen address")
	flag.Parse()
	raw, err := os.ReadFile(os.Getenv("WEBHOOK_SECRET_FILE"))
	if err != nil {
		log.Fatal(err)
	}
	key, err := secretKey(string(raw))
	if err != nil {
		log.Fatal(err)
	}
	h := &receiver{key: key, now: time.Now, out: os.Stdout}
	log.Fatal(http.ListenAndServe(*addr, h))
}

// secretKey returns the key of a secret written "whsec_" and base64.
func secretKey(s string) ([]byte, error) {
	b64, ok := strings.CutPrefix(strings.TrimSpace(s), "whsec_")
	if !ok {
		return nil, errors.New("the secret must start with whsec_")
	}
	return base64.StdEncoding.DecodeString(b64)
}

// receiver verifies and writes guardian's events.
type receiver struct {
	key []byte
	now func() time.Time
	out io.Writer
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	if err := rc.verify(r.Header, body); err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	var ev struct {
		Type string            `json:"type"`
		Data map[string]string `json:"data"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		http.Error(w, "not an event", http.StatusBadRequest)
		return
	}
	// Here: post to a chat, page someone for hard_stop_started bursts or
	// fallback_started, dedupe by webhook-id (delivery is at least once).
	fmt.Fprintf(rc.out, "%s %s %v\n", r.Header.Get("webhook-id"), ev.Type, ev.Data)
	w.WriteHeader(http.StatusNoContent)
}

// verify checks the message's timestamp and its signature: one of the
// space-separated "v1,<base64>" signatures must be the HMAC-SHA256 of
// "id.timestamp.body".
func (rc *receiver) verify(h http.Header, body []byte) error {
	id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || id == "" {
		return errors.New("missing webhook-id or webhook-timestamp")
	}
	if d := rc.now().Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return errors.New("timestamp too far from now")
	}
	m := hmac.New(sha256.New, rc.key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	want := m.Sum(nil)
	for _, sig := range strings.Fields(h.Get("webhook-signature")) {
		v, b64, ok := strings.Cut(sig, ",")
		got, err := base64.StdEncoding.DecodeString(b64)
		if ok && v == "v1" && err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no valid signature")
}
