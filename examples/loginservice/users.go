package main

import (
	"crypto/subtle"
	"fmt"
	"strings"
	"sync"

	"golang.org/x/crypto/bcrypt"
)

// Users is the service's user table, held in memory: bcrypt password hashes,
// and two stand-ins for what a real service has elsewhere — a fixed code
// for the user's second factor (a real service verifies a TOTP or a WebAuthn
// assertion) and a fixed reset code (a real service e-mails a single-use
// link). Names are looked up trimmed and lower-cased. Users is safe for
// concurrent use.
type Users struct {
	cost  int
	dummy []byte

	mu    sync.RWMutex
	users map[string]*user
}

type user struct {
	hash         []byte
	secondFactor string
	resetCode    string
}

// NewUsers returns an empty table hashing passwords at bcrypt cost (see
// bcrypt.DefaultCost; tests use bcrypt.MinCost to stay fast).
func NewUsers(cost int) (*Users, error) {
	// Unknown users are checked against this hash, so that they take as
	// long as known ones and the timing does not tell which names exist.
	dummy, err := bcrypt.GenerateFromPassword([]byte("loginservice: no such user"), cost)
	if err != nil {
		return nil, fmt.Errorf("loginservice: %w", err)
	}
	return &Users{cost: cost, dummy: dummy, users: make(map[string]*user)}, nil
}

func key(name string) string { return strings.ToLower(strings.TrimSpace(name)) }

// Add adds a user with a password, a second-factor code and a reset code.
func (u *Users) Add(name, password, secondFactor, resetCode string) error {
	hash, err := bcrypt.GenerateFromPassword([]byte(password), u.cost)
	if err != nil {
		return fmt.Errorf("loginservice: %w", err)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.users[key(name)] = &user{hash: hash, secondFactor: secondFactor, resetCode: resetCode}
	return nil
}

func (u *Users) get(name string) (user, bool) {
	u.mu.RLock()
	defer u.mu.RUnlock()
	p, ok := u.users[key(name)]
	if !ok {
		return user{}, false
	}
	return *p, true
}

// Verify reports whether password is name's. It takes as long for a name
// that does not exist.
func (u *Users) Verify(name, password string) bool {
	p, ok := u.get(name)
	if !ok {
		u.Burn()
		return false
	}
	return bcrypt.CompareHashAndPassword(p.hash, []byte(password)) == nil
}

// Burn takes as long as a password check and checks nothing: for answers
// that must not be told from a wrong password by their timing.
func (u *Users) Burn() {
	_ = bcrypt.CompareHashAndPassword(u.dummy, []byte("loginservice: burn"))
}

// SecondFactor reports whether code is name's second factor.
func (u *Users) SecondFactor(name, code string) bool {
	p, ok := u.get(name)
	return ok && code != "" && subtle.ConstantTimeCompare([]byte(p.secondFactor), []byte(code)) == 1
}

// ResetCode reports whether code is name's reset code, changing nothing.
func (u *Users) ResetCode(name, code string) bool {
	p, ok := u.get(name)
	return ok && code != "" && subtle.ConstantTimeCompare([]byte(p.resetCode), []byte(code)) == 1
}

// Reset sets name's password to newPassword if resetCode is name's reset
// code, and reports whether it did.
func (u *Users) Reset(name, resetCode, newPassword string) (bool, error) {
	hash, err := bcrypt.GenerateFromPassword([]byte(newPassword), u.cost)
	if err != nil {
		return false, fmt.Errorf("loginservice: %w", err)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	p, ok := u.users[key(name)]
	if !ok || resetCode == "" || subtle.ConstantTimeCompare([]byte(p.resetCode), []byte(resetCode)) != 1 {
		return false, nil
	}
	p.hash = hash
	return true, nil
}
