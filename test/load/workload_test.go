package main

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
)

// checkBody is a check request as guardian reads it.
type checkBody struct {
	Flow      string `json:"flow"`
	Account   string `json:"account"`
	IP        string `json:"ip"`
	Recipient string `json:"recipient"`
}

func TestMixProportionsAndShapes(t *testing.T) {
	m := &mix{AttackShare: 0.10, OTPShare: 0.05, AttackAccounts: 50, AttackPrefixes: 8, Tag: "t1"}
	rng := rand.New(rand.NewPCG(7, 7))
	const n = 20_000
	counts := map[kind]int{}
	accounts := map[string]int{}
	prefixes := map[netip.Prefix]bool{}
	var b []byte
	for range n {
		var k kind
		k, b = m.next(rng, b[:0])
		counts[k]++
		var c checkBody
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatalf("body %s is not JSON: %v", b, err)
		}
		ip, err := netip.ParseAddr(c.IP)
		if err != nil {
			t.Fatalf("body %s: bad ip: %v", b, err)
		}
		switch k {
		case legit, attacker:
			if c.Flow != "login" || c.Account == "" || c.Recipient != "" {
				t.Fatalf("%s body %s: want a login with an account", k, b)
			}
			accounts[c.Account]++
			if k == attacker {
				p, _ := ip.Prefix(24)
				prefixes[p] = true
			}
		case otpSend:
			if c.Flow != "otp_send" || !strings.HasPrefix(c.Recipient, "+") || len(c.Recipient) != 13 || c.Account != "" {
				t.Fatalf("otp body %s: want an otp_send to a 12-digit E.164 number", b)
			}
		}
	}
	near := func(got int, share float64) bool {
		want := share * n
		return math.Abs(float64(got)-want) < 5*math.Sqrt(want) // five sigma
	}
	if !near(counts[otpSend], 0.05) || !near(counts[attacker], 0.95*0.10) || !near(counts[legit], 0.95*0.90) {
		t.Errorf("counts = %v, want about 5%% otp, 9.5%% attackers, 85.5%% legit of %d", counts, n)
	}
	// Attackers concentrate on their accounts and prefixes; every
	// legitimate user is new.
	victims := 0
	for acct, c := range accounts {
		if strings.HasPrefix(acct, "victim-") {
			victims++
			continue
		}
		if c != 1 {
			t.Errorf("legitimate account %s seen %d times, want once", acct, c)
		}
	}
	if victims > 50 || victims < 40 {
		t.Errorf("attackers used %d accounts, want most of the 50", victims)
	}
	if len(prefixes) != 8 {
		t.Errorf("attackers came from %d /24 prefixes, want 8", len(prefixes))
	}
}

func TestReportBody(t *testing.T) {
	for _, tt := range []struct {
		k    kind
		want string
	}{
		{legit, `{"attempt_id":"abc_-1","outcome":"success"}`},
		{attacker, `{"attempt_id":"abc_-1","outcome":"failure"}`},
		{otpSend, `{"attempt_id":"abc_-1","outcome":"success"}`},
	} {
		if got := string(reportBody(nil, []byte("abc_-1"), tt.k)); got != tt.want {
			t.Errorf("reportBody(%s) = %s, want %s", tt.k, got, tt.want)
		}
	}
}

func TestReadingCheckResponses(t *testing.T) {
	for _, tt := range []struct {
		body     string
		id, dec  string
		degraded bool
	}{
		{`{"decision":"allow","retry_after_ms":0,"attempt_id":"AQID_-x","degraded":false,"limits":[],"shadow":[]}`, "AQID_-x", "allow", false},
		{`{"decision":"challenge","rule":"g","attempt_id":"z","degraded":true,"limits":[],"shadow":[]}`, "z", "challenge", true},
		{`{"decision":"slow","rule":"login-account","retry_after_ms":41000,"degraded":false,"limits":[],"shadow":[]}`, "", "slow", false},
		{`{"decision":"block","rule":"login-hard-stop","degraded":false,"limits":[],"shadow":[]}`, "", "block", false},
		{`{"error":{"code":"invalid_ip","message":"x"}}`, "", "", false},
		{`{"attempt_id":"unterminated`, "", "", false},
	} {
		if got := string(attemptID([]byte(tt.body))); got != tt.id {
			t.Errorf("attemptID(%s) = %q, want %q", tt.body, got, tt.id)
		}
		if got := decision([]byte(tt.body)); got != tt.dec {
			t.Errorf("decision(%s) = %q, want %q", tt.body, got, tt.dec)
		}
		if got := degraded([]byte(tt.body)); got != tt.degraded {
			t.Errorf("degraded(%s) = %v, want %v", tt.body, got, tt.degraded)
		}
	}
}

func TestAppendDigits(t *testing.T) {
	for _, tt := range []struct {
		v    uint64
		n    int
		want string
	}{
		{7, 4, "0007"},
		{123456789, 8, "23456789"},
		{0, 3, "000"},
	} {
		if got := string(appendDigits([]byte("x"), tt.v, tt.n)); got != "x"+tt.want {
			t.Errorf("appendDigits(%d, %d) = %s, want x%s", tt.v, tt.n, got, tt.want)
		}
	}
}
