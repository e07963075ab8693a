package main

import (
	"fmt"
	"io"

	"github.com/guardian-sec/guardian/internal/keys"
)

const pseudonymHelp = `Usage: guardian pseudonym [--kind account|recipient|network] [flags] VALUE

Prints the pseudonym guardian names VALUE by in audit lines, the decision log,
shadow and enforced top keys, the console and webhooks: h- and 22 base64url
characters, under the hash key serve uses (--hash-key, else derived from the
first signing key), VALUE normalised as serve normalises checks. Give the key
flags serve is given; they read the same environment variables, the others
read none. POST /v1/pseudonyms answers the same.
`

// pseudonymCmd is `guardian pseudonym`.
func pseudonymCmd(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	c := newCommand("guardian pseudonym", pseudonymHelp)
	fs := c.fs
	var signing, hashKey keyFlags
	var kind, tenant, accountFold, region string
	fs.StringVar(&kind, "kind", keys.PseudonymAccount, "what VALUE is: account, recipient (a phone number or an e-mail address) or network (an address or a CIDR prefix)")
	fs.StringVar(&tenant, "tenant", "", "the tenant whose account or recipient VALUE is (a token's --tenant); empty: the default tenant. Networks are every tenant's")
	signing.register(c, "signing-key", "the signing key serve uses, when it has no --hash-key of its own")
	hashKey.register(c, "hash-key", "the hash key serve uses, if it has one")
	fs.StringVar(&accountFold, "account-fold", "", "serve's --account-fold")
	fs.StringVar(&region, "default-region", "", "serve's --default-region")
	pos, code, ok := c.parse(args, getenv, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		c.fail(stderr, "want one VALUE")
		return exitUsage
	}
	norm, err := normalizer(accountFold, region)
	if err != nil {
		c.fail(stderr, "%v", err)
		return exitUsage
	}
	h, err := pseudonymHasher(&signing, &hashKey)
	if err == nil && tenant != "" {
		err = keys.CheckTenant(tenant)
	}
	if err != nil {
		c.fail(stderr, "%v", err)
		return exitUsage
	}
	h = h.Tenant(tenant)
	p, err := h.PseudonymOf(norm, kind, pos[0])
	if err != nil {
		fmt.Fprintln(stderr, "guardian pseudonym:", err)
		return exitUsage
	}
	fmt.Fprintln(stdout, p)
	return exitOK
}

// pseudonymHasher returns the Hasher of serve's hash key: hashKey when
// given, else the first signing key.
func pseudonymHasher(signing, hashKey *keyFlags) (*keys.Hasher, error) {
	if hk, ok, err := hashKey.load(); err != nil || ok {
		return keys.NewHasher(hk), err
	}
	all, ok, err := signing.loadAll()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("a key is required: --hash-key or --hash-key-file, else --signing-key or --signing-key-file (or their GUARDIAN_ variables)")
	}
	return keys.NewHasher(all[0]), nil
}
