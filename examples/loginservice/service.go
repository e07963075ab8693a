package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/guardian-sec/guardian/client"
)

// minFingerprintKey is the shortest Config.FingerprintKey.
const minFingerprintKey = 32

// DeviceCookie is the cookie holding guardian's device token. It is
// HttpOnly (no script reads it), Secure and SameSite=Strict.
const DeviceCookie = "device"

// deviceCookieAge is how long the browser keeps the device token: guardian's
// device tokens last 90 days.
const deviceCookieAge = 90 * 24 * time.Hour

// Config is what a Service is built from.
type Config struct {
	// Guardian decides logins and resets; its token has scope check.
	// Required.
	Guardian *client.Client
	// Admin lifts guardian's hard stop after a verified reset; its token
	// has scope admin. Required.
	Admin *client.Client
	// Users is the user table. Required.
	Users *Users
	// FingerprintKey keys the secret fingerprints sent with each login
	// (client.Fingerprint): the service's own secret, at least 32 random
	// bytes, the same on every instance, never guardian's signing key.
	// Required.
	FingerprintKey []byte
	// ClientIP returns the end user's address. Nil means the host of the
	// request's RemoteAddr: right for a service reached directly. Behind a
	// proxy, read the address the proxy sets, and only from that proxy: an
	// address taken from a header anyone can send lets an attacker choose
	// their own key.
	ClientIP func(*http.Request) string
	// Responder writes refusals. Logins come from users who have not proved
	// who they are, so the service sets OmitQuota whatever the caller says.
	Responder client.Responder
	// Logger receives the service's logs. Nil means slog.Default().
	Logger *slog.Logger
}

// Service is the login service: POST /login and POST /reset. It is safe for
// concurrent use.
type Service struct {
	cfg    Config
	log    *slog.Logger
	router *gin.Engine
}

// New returns the Service for cfg.
func New(cfg Config) (*Service, error) {
	if cfg.Guardian == nil || cfg.Admin == nil || cfg.Users == nil {
		return nil, errors.New("loginservice: Guardian, Admin and Users are required")
	}
	if len(cfg.FingerprintKey) < minFingerprintKey {
		return nil, fmt.Errorf("loginservice: FingerprintKey: want %d bytes at least, got %d", minFingerprintKey, len(cfg.FingerprintKey))
	}
	if cfg.ClientIP == nil {
		cfg.ClientIP = remoteHost
	}
	cfg.Responder.OmitQuota = true
	s := &Service{cfg: cfg, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.Recovery())
	r.POST("/login", s.login)
	r.POST("/reset", s.reset)
	s.router = r
	return s, nil
}

// ServeHTTP serves one request.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// Bodies of the answers that are not guardian's decisions; they have the
// shape of client.Body.
var (
	badRequest   = client.Body{Error: "invalid_request", Next: "retry"}
	unavailable  = client.Body{Error: "unavailable", Next: "retry"}
	badResetCode = client.Body{Error: "invalid_reset_code", Next: "reset"}
)

type loginRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
	// Code is the second factor, sent when a login was challenged.
	Code string `json:"code"`
}

// login is POST /login: ask guardian, put its challenge to the user when it
// asks for one, verify only if it says so, tell guardian how it went, and
// keep its device token on the device. client.Attempt is that whole flow.
func (s *Service) login(c *gin.Context) {
	var req loginRequest
	if err := c.ShouldBindJSON(&req); err != nil || req.Username == "" || req.Password == "" {
		c.JSON(http.StatusBadRequest, badRequest)
		return
	}
	ctx := c.Request.Context()
	device, _ := c.Cookie(DeviceCookie)
	res, err := s.cfg.Guardian.Attempt(ctx, client.CheckRequest{
		Flow:        client.FlowLogin,
		Account:     req.Username,
		IP:          s.cfg.ClientIP(c.Request),
		DeviceToken: device,
		// The password never leaves the service: guardian sees only
		// whether this guess was tried before, on this account or on
		// others. It must be verified all the same, repeat or not.
		SecretFingerprint: client.Fingerprint(s.cfg.FingerprintKey, []byte(req.Password)),
	},
		// guardian challenges (a sprayed password, a network failing for
		// many accounts, a global attack): the second factor sent with the
		// login passes it; without one, the user is asked for it and the
		// password is not verified. A CAPTCHA's answer would do as well.
		func(context.Context, client.Decision) (bool, error) {
			return s.cfg.Users.SecondFactor(req.Username, req.Code), nil
		},
		func(context.Context) (bool, error) {
			return s.cfg.Users.Verify(req.Username, req.Password), nil
		})
	if err != nil {
		// guardian refused the request itself (a bug here, a bad token):
		// nothing was decided, so nothing is verified.
		s.log.Error("guardian refused the login check", "err", err)
		c.JSON(http.StatusInternalServerError, unavailable)
		return
	}
	d := res.Decision
	if d.Unavailable {
		s.log.Warn("guardian did not answer; the client's policy decided", "reason", d.Reason, "decision", d.Action)
	}
	if res.ReportErr != nil {
		// guardian counts an attempt it never heard about as a failure:
		// the safe side. The user is not made to pay for it.
		s.log.Warn("report to guardian lost", "err", res.ReportErr)
	}
	switch {
	case !res.Verified:
		// Slowed, blocked, or a challenge not passed: the attempt that
		// was challenged stays unreported, which guardian counts as a
		// failure.
		if d.Action == client.Slow && s.cfg.Responder.SlowAsInvalid {
			s.cfg.Users.Burn() // as long as a wrong password takes
		}
		s.cfg.Responder.Refuse(c.Writer, d)
		return
	case !res.OK:
		s.cfg.Responder.InvalidCredentials(c.Writer, d)
		return
	}
	if res.DeviceToken != "" {
		http.SetCookie(c.Writer, &http.Cookie{
			Name:     DeviceCookie,
			Value:    res.DeviceToken,
			Path:     "/",
			MaxAge:   int(deviceCookieAge / time.Second),
			HttpOnly: true,
			Secure:   true,
			SameSite: http.SameSiteStrictMode,
		})
	}
	// A real service would start a session here.
	c.JSON(http.StatusOK, gin.H{"logged_in": true})
}

type resetRequest struct {
	Username string `json:"username"`
	// ResetCode stands for the single-use link a real service e-mails:
	// proof that the user controls the account's verified channel.
	ResetCode   string `json:"reset_code"`
	NewPassword string `json:"new_password"`
}

// reset is POST /reset: the end of a password reset through a verified
// channel. Guessing reset codes is itself an attempt guardian paces (flow
// password_reset); a right code sets the new password and lifts guardian's
// hard stop on the account.
func (s *Service) reset(c *gin.Context) {
	var req resetRequest
	if err := c.ShouldBindJSON(&req); err != nil || req.Username == "" || req.ResetCode == "" || req.NewPassword == "" {
		c.JSON(http.StatusBadRequest, badRequest)
		return
	}
	ctx := c.Request.Context()
	// The device token counts here too: from the owner's own device, a
	// reset keeps its own budget while someone fails against the account.
	device, _ := c.Cookie(DeviceCookie)
	res, err := s.cfg.Guardian.Attempt(ctx, client.CheckRequest{
		Flow: client.FlowPasswordReset, Account: req.Username, IP: s.cfg.ClientIP(c.Request), DeviceToken: device,
	},
		// The reset code, from the account's verified channel, is itself
		// the proof a challenge asks for.
		func(context.Context, client.Decision) (bool, error) {
			return s.cfg.Users.ResetCode(req.Username, req.ResetCode), nil
		},
		func(context.Context) (bool, error) {
			return s.cfg.Users.Reset(req.Username, req.ResetCode, req.NewPassword)
		})
	if err != nil {
		s.log.Error("reset failed", "err", err)
		c.JSON(http.StatusInternalServerError, unavailable)
		return
	}
	if res.ReportErr != nil {
		s.log.Warn("report to guardian lost", "err", res.ReportErr)
	}
	d := res.Decision
	switch {
	case !res.Verified && d.Action == client.Challenge:
		// The challenge was a wrong reset code.
		c.JSON(http.StatusUnauthorized, badResetCode)
		return
	case !res.Verified:
		// A slowed reset says so plainly: there is no password to
		// confuse it with.
		(client.Responder{OmitQuota: true}).Refuse(c.Writer, d)
		return
	case !res.OK:
		c.JSON(http.StatusUnauthorized, badResetCode)
		return
	}
	if err := s.cfg.Admin.ResetAccount(context.WithoutCancel(ctx), req.Username); err != nil {
		// The password changed but the hard stop stands: say so, so the
		// user can try again rather than meet a block they were told was
		// lifted.
		s.log.Error("guardian did not lift the hard stop", "err", err)
		c.JSON(http.StatusServiceUnavailable, unavailable)
		return
	}
	c.JSON(http.StatusOK, gin.H{"reset": true, "next": "login"})
}
