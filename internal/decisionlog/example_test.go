package decisionlog_test

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/guardian-sec/guardian/internal/decisionlog"
	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/requestid"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/secret"
)

func ExampleLog() {
	key, err := secret.New([]byte("example-signing-key-0123456789abcdef"))
	if err != nil {
		panic(err)
	}
	var out bytes.Buffer
	l := decisionlog.New(decisionlog.Config{
		Out: &out,
		Key: key,
		Now: func() time.Time { return time.Date(2026, 11, 29, 10, 0, 0, 250e6, time.UTC) },
	})
	// What decisionlog.Engine does after the engine decided a check, and
	// after it recorded the check's report, each with its request's id.
	l.Check(requestid.With(context.Background(), "req-1"), engine.CheckRequest{Flow: rules.OTPSend, Account: "Alice@Example.com", IP: "203.0.113.7", Recipient: "+1 555 010 0000"},
		engine.Decision{Action: rules.Allow, AttemptID: "the-attempt-id"})
	l.Report(requestid.With(context.Background(), "req-2"), "the-attempt-id", engine.Success)
	if err := l.Close(); err != nil {
		panic(err)
	}
	fmt.Print(out.String())
	// Output:
	// {"ts":"2026-11-29T10:00:00.250Z","type":"check","id":"AC1VZyg0x_HiyvgJfdww_Q","flow":"otp_send","account":"h-SFwb7u2aDIKffP96hRyUoQ","ip":"195.250.118.123","recipient":"h-axUnluolapgjuGzy4qx91Q","decision":"allow","request_id":"req-1"}
	// {"ts":"2026-11-29T10:00:00.250Z","type":"report","id":"AC1VZyg0x_HiyvgJfdww_Q","outcome":"success","request_id":"req-2"}
}
