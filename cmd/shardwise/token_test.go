package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/logintoken"
)

// keygen writes the login key pair into a new directory and returns the
// two files.
func keygen(t *testing.T) (key, pub string) {
	t.Helper()
	dir := t.TempDir()
	key, pub = filepath.Join(dir, "login.key"), filepath.Join(dir, "login.pub")
	if _, err := runCmd(t, newRootCmd(), "", "token", "keygen", "--key", key, "--pub", pub); err != nil {
		t.Fatal(err)
	}
	return key, pub
}

// token keygen writes a pair whose public half verifies what token issues
// with the private half: one token per account of a range, in order, for
// the cluster named, and a node reading the public key file gets exactly
// the key.
func TestTokenIssuesWhatTheNodesVerify(t *testing.T) {
	key, pub := keygen(t)
	if fi, err := os.Stat(key); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the private key file: %v, %v", fi, err)
	}
	out, err := runCmd(t, newRootCmd(), "", "token", "--key", key, "--cluster", "c1", "--account", "5-8", "--ttl", "1m")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(out)
	if len(lines) != 4 {
		t.Fatalf("%d tokens for accounts 5-8:\n%s", len(lines), out)
	}
	pk, err := readLoginPub("--login-pub", pub)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := readLoginKey("--key", key)
	if err != nil {
		t.Fatal(err)
	}
	if !pk.Equal(priv.Public().(ed25519.PublicKey)) {
		t.Fatal("the public key file does not hold the private key's public half")
	}
	v, err := logintoken.NewVerifier(logintoken.VerifierConfig{Cluster: "c1", Audience: gateway.Audience,
		Keys: []ed25519.PublicKey{pk}, SingleUse: noClaims{}})
	if err != nil {
		t.Fatal(err)
	}
	for i, tok := range lines {
		c, err := v.Check(tok)
		if err != nil {
			t.Fatalf("token %d: %v", i, err)
		}
		if c.Account != account.ID(5+i) || c.ExpiresAt.Sub(c.IssuedAt).Minutes() != 1 {
			t.Fatalf("token %d: %+v, want account %d valid for 1m", i, c, 5+i)
		}
	}
	other, err := logintoken.NewVerifier(logintoken.VerifierConfig{Cluster: defaultCluster, Audience: gateway.Audience,
		Keys: []ed25519.PublicKey{pk}, SingleUse: noClaims{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Check(lines[0]); !errors.Is(err, logintoken.ErrWrongCluster) {
		t.Fatalf("a token for c1 checked by cluster %q: %v", defaultCluster, err)
	}
	// keygen never overwrites.
	if _, err := runCmd(t, newRootCmd(), "", "token", "keygen", "--key", key, "--pub", pub+".2"); errcode.Of(err) != errcode.ConfigInvalid {
		t.Fatalf("keygen over an existing key: %v", err)
	}
	if _, err := os.Stat(pub + ".2"); err == nil {
		t.Fatal("a failed keygen left a public key behind")
	}
}

type noClaims struct{}

func (noClaims) ClaimToken(context.Context, logintoken.ID, time.Time) error { return nil }

// Every refused flag is named as typed, with its value, before any work;
// a node is never given the private key as its public key.
func TestTokenFlagErrorsNameTheFlag(t *testing.T) {
	key, pub := keygen(t)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"token", "--key", key}, `--account = "": required`},
		{[]string{"token", "--key", key, "--account", "0"}, `--account = "0": must be an account`},
		{[]string{"token", "--key", key, "--account", "9-3"}, `--account = "9-3": must be a range`},
		{[]string{"token", "--key", key, "--account", "1", "--ttl", "11m"}, "--ttl = 11m0s: must be positive and at most 10m0s"},
		{[]string{"token", "--key", key, "--account", "1", "--cluster", ""}, `--cluster = "": must be 1..64 bytes`},
		{[]string{"token", "--account", "1"}, `--key = "": required`},
		{[]string{"token", "--key", key, "--account", "1-1000000"}, `--account = "1-1000000": a range of 1000000 accounts: at most 10000 at once (issue several ranges)`},
		{[]string{"token", "--key", key, "--account", "1", "--audience", ""}, `--audience = "": must be 1..64 bytes (a gateway accepts "gateway")`},
		{[]string{"token", "--key", pub, "--account", "1"}, `--key = "` + pub + `": holds a "PUBLIC KEY" PEM block, want "PRIVATE KEY"`},
		{[]string{"token", "keygen", "--pub", pub}, `--key = "": required`},
	}
	for _, c := range cases {
		_, err := runCmd(t, newRootCmd(), "", c.args...)
		if errcode.Of(err) != errcode.ConfigInvalid {
			t.Errorf("%v: error %v, want %s", c.args, err, errcode.ConfigInvalid)
			continue
		}
		if got := strings.TrimPrefix(err.Error(), errcode.ConfigInvalid+": "); !strings.HasPrefix(got, "invalid configuration: "+c.want) {
			t.Errorf("%v:\n got  %s\n want %s…", c.args, got, c.want)
		}
	}
	if _, err := readLoginPub("--login-pub", key); err == nil || !strings.Contains(err.Error(), "holds a private key") {
		t.Fatalf("a private key as the nodes' public key: %v", err)
	}
}

// cancelOnWrite cancels a context at the first line written to it.
type cancelOnWrite struct {
	cancel context.CancelFunc
	lines  int
}

func (w *cancelOnWrite) Write(p []byte) (int, error) {
	w.lines += strings.Count(string(p), "\n")
	w.cancel()
	return len(p), nil
}

// An interrupt (the command's context ending, as Ctrl-C ends it) stops
// the printing at once: one token printed of a range of ten thousand.
func TestTokenStopsOnInterrupt(t *testing.T) {
	key, _ := keygen(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w := &cancelOnWrite{cancel: cancel}
	cmd := newRootCmd()
	cmd.SetOut(w)
	cmd.SetErr(w)
	cmd.SetArgs([]string{"token", "--key", key, "--account", "1-10000"})
	err := cmd.ExecuteContext(ctx)
	if !errors.Is(err, context.Canceled) || w.lines != 1 {
		t.Fatalf("interrupted after the first token: %d lines, error %v; want 1 line and context.Canceled", w.lines, err)
	}
	if !strings.Contains(err.Error(), "stopped after 1 of 10000 tokens") {
		t.Errorf("error %q does not say how far it got", err)
	}
}

// --audience names the tokens' audience: a verifier of that audience
// accepts them, a gateway's refuses them.
func TestTokenAudience(t *testing.T) {
	key, pub := keygen(t)
	out, err := runCmd(t, newRootCmd(), "", "token", "--key", key, "--account", "3", "--audience", "shop")
	if err != nil {
		t.Fatal(err)
	}
	pk, err := readLoginPub("--login-pub", pub)
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(out)
	for _, tc := range []struct {
		audience string
		want     error
	}{{"shop", nil}, {gateway.Audience, logintoken.ErrWrongAudience}} {
		v, err := logintoken.NewVerifier(logintoken.VerifierConfig{Cluster: defaultCluster, Audience: tc.audience,
			Keys: []ed25519.PublicKey{pk}, SingleUse: noClaims{}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Check(tok); !errors.Is(err, tc.want) {
			t.Errorf("checked for audience %q: %v, want %v", tc.audience, err, tc.want)
		}
	}
}
