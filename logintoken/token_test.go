package logintoken_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/testseed"
	"github.com/shardwise/shardwise/logintoken"
)

var start = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

// seededKey returns a deterministic key pair, different per seed.
func seededKey(seed byte) (ed25519.PublicKey, ed25519.PrivateKey) {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
	return priv.Public().(ed25519.PublicKey), priv
}

type rig struct {
	clock  *clock.Fake
	dir    *directory.Memory
	issuer *logintoken.Issuer
	a, b   *logintoken.Verifier // two nodes sharing one directory
	priv   ed25519.PrivateKey
	pub    ed25519.PublicKey
}

func newRig(t *testing.T) *rig {
	t.Helper()
	fc := clock.NewFake(start)
	dir, err := directory.NewMemory(directory.MemoryConfig{Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	pub, priv := seededKey(1)
	iss, err := logintoken.NewIssuer(logintoken.IssuerConfig{
		Cluster: "prod-eu", Key: priv, TTL: time.Minute, Clock: fc,
		Rand: rand.NewChaCha8([32]byte{1}),
	})
	if err != nil {
		t.Fatal(err)
	}
	newV := func() *logintoken.Verifier {
		v, err := logintoken.NewVerifier(logintoken.VerifierConfig{
			Cluster: "prod-eu", Audience: "gateway", Keys: []ed25519.PublicKey{pub},
			Leeway: 2 * time.Second, SingleUse: dir, Clock: fc,
		})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	return &rig{clock: fc, dir: dir, issuer: iss, a: newV(), b: newV(), priv: priv, pub: pub}
}

func wantCode(t *testing.T, what string, err error, sentinel *errcode.Sentinel) {
	t.Helper()
	if !errors.Is(err, sentinel) || errcode.Of(err) != sentinel.ErrorCode() {
		t.Fatalf("%s: err = %v (code %q), want %s", what, err, errcode.Of(err), sentinel.ErrorCode())
	}
}

func TestVerifyOnceThenReplayedOnAnotherNode(t *testing.T) {
	r := newRig(t)
	tok, claims, err := r.issuer.Issue(1001, "gateway")
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.a.Verify(context.Background(), tok)
	if err != nil {
		t.Fatalf("first verify: %v", err)
	}
	if got.Account != 1001 || got.ID != claims.ID || got.Cluster != "prod-eu" || !got.ExpiresAt.Equal(start.Add(time.Minute)) {
		t.Fatalf("claims = %+v", got)
	}
	_, err = r.b.Verify(context.Background(), tok)
	wantCode(t, "replay on node b", err, logintoken.ErrReplayed)
	_, err = r.a.Verify(context.Background(), tok)
	wantCode(t, "replay on node a", err, logintoken.ErrReplayed)
	// A second token for the same account is a different token.
	tok2, _, _ := r.issuer.Issue(1001, "gateway")
	if _, err := r.b.Verify(context.Background(), tok2); err != nil {
		t.Fatalf("second token: %v", err)
	}
}

// Go's base64 decoders skip \r and \n, even in strict mode: a token with
// line breaks added decodes to the same bytes, although Encode never
// writes one. Decode refuses it, and so does Verify, without using the
// token up: the token as issued still logs in afterwards.
func TestLineBreaksAreRefused(t *testing.T) {
	r := newRig(t)
	tok, _, err := r.issuer.Issue(1001, "gateway")
	if err != nil {
		t.Fatal(err)
	}
	k := len(tok) / 2
	for _, bad := range []string{
		tok + "\n", "\n" + tok, tok + "\r\n", tok + "\r",
		tok[:k] + "\r\n" + tok[k:], tok[:k] + "\n" + tok[k:], tok[:k] + "\r" + tok[k:],
	} {
		_, err := logintoken.Decode(bad)
		wantCode(t, fmt.Sprintf("Decode(%q)", bad), err, logintoken.ErrMalformed)
		_, err = r.a.Verify(context.Background(), bad)
		wantCode(t, fmt.Sprintf("Verify(%q)", bad), err, logintoken.ErrMalformed)
	}
	if _, err := r.a.Verify(context.Background(), tok); err != nil {
		t.Fatalf("the token as issued, after its altered copies were refused: %v", err)
	}
}

func TestVerifyRefusals(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	_, otherPriv := seededKey(2)
	sign := func(c logintoken.Claims, priv ed25519.PrivateKey) string {
		s, err := logintoken.Sign(c, priv)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	base := logintoken.Claims{
		ID: logintoken.ID{1}, IssuedAt: start, ExpiresAt: start.Add(time.Minute),
		Cluster: "prod-eu", Audience: "gateway", Account: 1002,
	}
	with := func(f func(*logintoken.Claims)) logintoken.Claims { c := base; f(&c); return c }

	good := sign(base, r.priv)
	raw, _ := base64.RawURLEncoding.DecodeString(good)
	raw[len(raw)-1] ^= 1
	flippedSig := base64.RawURLEncoding.EncodeToString(raw)
	raw, _ = base64.RawURLEncoding.DecodeString(good)
	raw[41+7] ^= 1 // last byte of the account: 1002 becomes 1003
	flippedBody := base64.RawURLEncoding.EncodeToString(raw)

	for _, tc := range []struct {
		name  string
		token string
		want  *errcode.Sentinel
	}{
		{"garbage", "not a token", logintoken.ErrMalformed},
		{"unknown key", sign(base, otherPriv), logintoken.ErrUnknownKey},
		{"flipped signature", flippedSig, logintoken.ErrBadSignature},
		{"flipped account", flippedBody, logintoken.ErrBadSignature},
		{"other cluster", sign(with(func(c *logintoken.Claims) { c.Cluster = "prod-us" }), r.priv), logintoken.ErrWrongCluster},
		{"other audience", sign(with(func(c *logintoken.Claims) { c.Audience = "admin" }), r.priv), logintoken.ErrWrongAudience},
		{"expired", sign(with(func(c *logintoken.Claims) {
			c.IssuedAt, c.ExpiresAt = start.Add(-time.Minute), start.Add(-2*time.Second)
		}), r.priv), logintoken.ErrExpired},
		{"from the future", sign(with(func(c *logintoken.Claims) {
			c.IssuedAt, c.ExpiresAt = start.Add(3*time.Second), start.Add(time.Minute)
		}), r.priv), logintoken.ErrNotYetValid},
		{"too long lived", sign(with(func(c *logintoken.Claims) { c.ExpiresAt = start.Add(time.Hour) }), r.priv), logintoken.ErrTooLongLived},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.a.Verify(ctx, tc.token)
			wantCode(t, tc.name, err, tc.want)
		})
	}
	// None of the refused tokens consumed the good token's id.
	if _, err := r.a.Verify(ctx, good); err != nil {
		t.Fatalf("good token after refusals: %v", err)
	}
}

func TestLeewayBoundaries(t *testing.T) {
	r := newRig(t)
	c := logintoken.Claims{ID: logintoken.ID{5}, IssuedAt: start.Add(2 * time.Second), ExpiresAt: start.Add(time.Minute),
		Cluster: "prod-eu", Audience: "gateway", Account: 1003}
	tok, _ := logintoken.Sign(c, r.priv)
	if _, err := r.a.Check(tok); err != nil {
		t.Fatalf("issued exactly leeway in the future: %v", err)
	}
	r.clock.Set(start.Add(time.Minute + 2*time.Second - time.Millisecond))
	if _, err := r.a.Check(tok); err != nil {
		t.Fatalf("just inside expiry+leeway: %v", err)
	}
	r.clock.Advance(time.Millisecond)
	_, err := r.a.Check(tok)
	wantCode(t, "at expiry+leeway", err, logintoken.ErrExpired)
}

// The single-use record outlasts expiry+leeway: a token replayed at the
// last instant a node with the same clock would accept it is still refused
// (for a node whose clock lags, see TestReplayOnALaggingNodeIsRefused).
func TestReplayAtTheEdgeOfLeeway(t *testing.T) {
	r := newRig(t)
	tok, _, _ := r.issuer.Issue(1004, "gateway")
	if _, err := r.a.Verify(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(time.Minute + 2*time.Second - time.Nanosecond)
	_, err := r.b.Verify(context.Background(), tok)
	wantCode(t, "replay just before expiry+leeway", err, logintoken.ErrReplayed)
}

// laggingClock is a node's clock that runs behind the store's by lag.
type laggingClock struct {
	*clock.Fake
	lag time.Duration
}

func (c laggingClock) Now() time.Time                  { return c.Fake.Now().Add(-c.lag) }
func (c laggingClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Leeway exists because node clocks differ. A node whose clock lags the
// store's by just under Leeway still accepts the token until its own
// expiry+leeway, which is nearly expiry+2·leeway on the store's clock; the
// claim must still be remembered then, or that node accepts a replay.
func TestReplayOnALaggingNodeIsRefused(t *testing.T) {
	r := newRig(t)
	const leeway = 2 * time.Second
	lag := leeway - time.Millisecond
	lagging, err := logintoken.NewVerifier(logintoken.VerifierConfig{
		Cluster: "prod-eu", Audience: "gateway", Keys: []ed25519.PublicKey{r.pub},
		Leeway: leeway, SingleUse: r.dir, Clock: laggingClock{r.clock, lag},
	})
	if err != nil {
		t.Fatal(err)
	}
	tok, claims, _ := r.issuer.Issue(1006, "gateway")
	if _, err := r.a.Verify(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	// The store's clock: past expiry+leeway. The lagging node's: still
	// inside its window, so only the single-use record can refuse it.
	r.clock.Set(claims.ExpiresAt.Add(leeway + lag - time.Millisecond))
	if _, err := lagging.Check(tok); err != nil {
		t.Fatalf("the lagging node should still accept the token's times: %v", err)
	}
	_, err = lagging.Verify(context.Background(), tok)
	wantCode(t, "replay on a lagging node", err, logintoken.ErrReplayed)
}

// A store that cannot answer refuses the login.
func TestStoreErrorRefuses(t *testing.T) {
	pub, priv := seededKey(1)
	failing := singleUseFunc(func(context.Context, logintoken.ID, time.Time) error {
		return directory.ErrUnavailable
	})
	v, err := logintoken.NewVerifier(logintoken.VerifierConfig{Cluster: "c", Audience: "a", Keys: []ed25519.PublicKey{pub}, SingleUse: failing})
	if err != nil {
		t.Fatal(err)
	}
	iss, _ := logintoken.NewIssuer(logintoken.IssuerConfig{Cluster: "c", Key: priv})
	tok, _, _ := iss.Issue(5, "a")
	if _, err := v.Verify(context.Background(), tok); !errors.Is(err, directory.ErrUnavailable) {
		t.Fatalf("verify with a failing store: %v", err)
	}
}

type singleUseFunc func(context.Context, logintoken.ID, time.Time) error

func (f singleUseFunc) ClaimToken(ctx context.Context, id logintoken.ID, until time.Time) error {
	return f(ctx, id, until)
}

func TestKeyRotation(t *testing.T) {
	fc := clock.NewFake(start)
	dir, _ := directory.NewMemory(directory.MemoryConfig{Clock: fc})
	oldPub, oldPriv := seededKey(1)
	newPub, newPriv := seededKey(2)
	v, err := logintoken.NewVerifier(logintoken.VerifierConfig{Cluster: "c", Audience: "a",
		Keys: []ed25519.PublicKey{oldPub, newPub}, SingleUse: dir, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	for _, priv := range []ed25519.PrivateKey{oldPriv, newPriv} {
		iss, _ := logintoken.NewIssuer(logintoken.IssuerConfig{Cluster: "c", Key: priv, Clock: fc})
		tok, c, _ := iss.Issue(6, "a")
		if c.Key != logintoken.KeyIDOf(priv.Public().(ed25519.PublicKey)) {
			t.Fatalf("key id %s not the signer's", c.Key)
		}
		if _, err := v.Verify(context.Background(), tok); err != nil {
			t.Fatalf("token from key %s: %v", c.Key, err)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	_, priv := seededKey(3)
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 2))
	str := func(max int) string {
		b := make([]byte, 1+rng.IntN(max))
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return string(b)
	}
	for i := range 500 {
		iat := time.UnixMilli(1 + rng.Int64N(1<<50))
		c := logintoken.Claims{
			IssuedAt: iat, ExpiresAt: iat.Add(time.Duration(1+rng.Int64N(1<<40)) * time.Millisecond),
			Cluster: str(logintoken.MaxClusterLen), Audience: str(logintoken.MaxAudienceLen),
			Account: account.ID(1 + rng.Uint64N(math.MaxUint64)),
		}
		for j := range c.ID {
			c.ID[j] = byte(rng.UintN(256))
		}
		s, err := logintoken.Sign(c, priv)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if len(s) > logintoken.MaxEncodedLen {
			t.Fatalf("case %d: %d characters, above MaxEncodedLen %d", i, len(s), logintoken.MaxEncodedLen)
		}
		tok, err := logintoken.Decode(s)
		if err != nil {
			t.Fatalf("case %d: decode: %v", i, err)
		}
		g := tok.Claims
		if g.ID != c.ID || !g.IssuedAt.Equal(c.IssuedAt) || !g.ExpiresAt.Equal(c.ExpiresAt) ||
			g.Cluster != c.Cluster || g.Audience != c.Audience || g.Account != c.Account ||
			g.Key != logintoken.KeyIDOf(priv.Public().(ed25519.PublicKey)) {
			t.Fatalf("case %d: round trip %+v != %+v", i, g, c)
		}
		back, err := tok.Encode()
		if err != nil || back != s {
			t.Fatalf("case %d: re-encode differs: %v", i, err)
		}
	}
}

func TestDecodeStrict(t *testing.T) {
	_, priv := seededKey(3)
	good, _ := logintoken.Sign(logintoken.Claims{IssuedAt: start, ExpiresAt: start.Add(time.Minute),
		Cluster: "c", Audience: "a", Account: 1}, priv)
	raw, _ := base64.RawURLEncoding.DecodeString(good)
	enc := base64.RawURLEncoding.EncodeToString
	mut := func(f func([]byte) []byte) string { return enc(f(bytes.Clone(raw))) }
	for name, s := range map[string]string{
		"empty":          "",
		"padded":         good + "==",
		"std alphabet":   strings.NewReplacer("-", "+", "_", "/").Replace(good) + "+",
		"trailing byte":  mut(func(b []byte) []byte { return append(b, 0) }),
		"short":          mut(func(b []byte) []byte { return b[:len(b)-1] }),
		"no account":     mut(func(b []byte) []byte { clear(b[41:49]); return b }),
		"zero cluster":   mut(func(b []byte) []byte { b[49] = 0; return b }),
		"long cluster":   mut(func(b []byte) []byte { b[49] = 200; return b }),
		"long audience":  mut(func(b []byte) []byte { b[49+2] = 200; return b }),
		"expiry first":   mut(func(b []byte) []byte { copy(b[33:41], b[25:33]); return b }),
		"too long input": strings.Repeat("A", logintoken.MaxEncodedLen+1),
	} {
		if _, err := logintoken.Decode(s); !errors.Is(err, logintoken.ErrMalformed) {
			t.Errorf("%s: Decode = %v, want ErrMalformed", name, err)
		}
	}
	// Non-canonical base64: the last character carries unused bits.
	last := good[len(good)-1]
	for _, alt := range "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_" {
		if byte(alt) == last {
			continue
		}
		s := good[:len(good)-1] + string(alt)
		if tok, err := logintoken.Decode(s); err == nil {
			if back, _ := tok.Encode(); back != s {
				t.Fatalf("non-canonical %q accepted", s)
			}
		}
	}
}

// The version 2 layout, field by field at the offsets Encode documents: a
// change to it must change this test and the version.
func TestLayoutVersion2(t *testing.T) {
	_, priv := seededKey(5)
	c := logintoken.Claims{ID: logintoken.ID{0xaa, 15: 0xbb}, IssuedAt: time.UnixMilli(0x0102), ExpiresAt: time.UnixMilli(0x0304),
		Cluster: "prod-eu", Audience: "gateway", Account: 0x1122334455667788}
	s, err := logintoken.Sign(c, priv)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	key := logintoken.KeyIDOf(priv.Public().(ed25519.PublicKey))
	want := "02" + hex.EncodeToString(key[:]) +
		"aa0000000000000000000000000000bb" +
		"0000000000000102" + "0000000000000304" +
		"1122334455667788" +
		"07" + hex.EncodeToString([]byte("prod-eu")) +
		"07" + hex.EncodeToString([]byte("gateway"))
	if got := hex.EncodeToString(raw[:len(raw)-ed25519.SignatureSize]); got != want {
		t.Fatalf("payload\n got %s\nwant %s", got, want)
	}
	if !ed25519.Verify(priv.Public().(ed25519.PublicKey), append([]byte("shardwise/logintoken/v2\x00"), raw[:len(raw)-64]...), raw[len(raw)-64:]) {
		t.Fatal("signature is not over the v2 signing context and the payload")
	}
}

// signV1 builds a version 1 token the way the previous Encode did: the
// account as a third length-prefixed text field, signed under the v1
// context.
func signV1(priv ed25519.PrivateKey, iat, exp time.Time, cluster, audience, acct string) string {
	key := logintoken.KeyIDOf(priv.Public().(ed25519.PublicKey))
	p := append([]byte{1}, key[:]...)
	p = append(p, make([]byte, 16)...)
	p = binary.BigEndian.AppendUint64(p, uint64(iat.UnixMilli()))
	p = binary.BigEndian.AppendUint64(p, uint64(exp.UnixMilli()))
	for _, f := range []string{cluster, audience, acct} {
		p = append(append(p, byte(len(f))), f...)
	}
	sig := ed25519.Sign(priv, append([]byte("shardwise/logintoken/v1\x00"), p...))
	return base64.RawURLEncoding.EncodeToString(append(p, sig...))
}

// A version 1 token, validly signed and in its time window, is refused with
// ErrUnsupportedVersion, whether its account text is a number or not, and
// does not consume anything in the single-use store.
func TestVersion1Refused(t *testing.T) {
	r := newRig(t)
	for _, acct := range []string{"alice", "1001"} {
		tok := signV1(r.priv, start, start.Add(time.Minute), "prod-eu", "gateway", acct)
		if _, err := logintoken.Decode(tok); !errors.Is(err, logintoken.ErrUnsupportedVersion) ||
			errcode.Of(err) != logintoken.CodeUnsupportedVersion || !strings.Contains(err.Error(), "version 1") {
			t.Fatalf("Decode(v1 %q) = %v, want ErrUnsupportedVersion naming version 1", acct, err)
		}
		_, err := r.a.Verify(context.Background(), tok)
		wantCode(t, "Verify(v1 "+acct+")", err, logintoken.ErrUnsupportedVersion)
	}
	_, priv := seededKey(3)
	good, _ := logintoken.Sign(logintoken.Claims{IssuedAt: start, ExpiresAt: start.Add(time.Minute),
		Cluster: "c", Audience: "a", Account: 1}, priv)
	raw, _ := base64.RawURLEncoding.DecodeString(good)
	raw[0] = 3
	if _, err := logintoken.Decode(base64.RawURLEncoding.EncodeToString(raw)); !errors.Is(err, logintoken.ErrUnsupportedVersion) {
		t.Fatalf("Decode(version 3) = %v, want ErrUnsupportedVersion", err)
	}
}

func TestSignRefusesNoAccount(t *testing.T) {
	_, priv := seededKey(3)
	_, err := logintoken.Sign(logintoken.Claims{IssuedAt: start, ExpiresAt: start.Add(time.Minute),
		Cluster: "c", Audience: "a"}, priv)
	wantCode(t, "Sign(account None)", err, logintoken.ErrMalformed)
	r := newRig(t)
	_, _, err = r.issuer.Issue(account.None, "gateway")
	wantCode(t, "Issue(account None)", err, logintoken.ErrMalformed)
}

func FuzzDecode(f *testing.F) {
	_, priv := seededKey(4)
	good, _ := logintoken.Sign(logintoken.Claims{IssuedAt: start, ExpiresAt: start.Add(time.Minute),
		Cluster: "prod-eu", Audience: "gateway", Account: 1001}, priv)
	f.Add(good)
	f.Add("")
	f.Add("AQ")
	f.Add(good[:len(good)-4])
	// Bytes a lenient base64 decoder skips: anything accepted must still
	// re-encode to exactly the bytes given (the check below).
	f.Add(good + "\n")
	f.Add("\n" + good)
	f.Add(good[:20] + "\r\n" + good[20:])
	f.Add(signV1(priv, start, start.Add(time.Minute), "prod-eu", "gateway", "alice"))
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := logintoken.Decode(s)
		if err != nil {
			if !errors.Is(err, logintoken.ErrMalformed) && !errors.Is(err, logintoken.ErrUnsupportedVersion) {
				t.Fatalf("Decode error without ErrMalformed or ErrUnsupportedVersion: %v", err)
			}
			return
		}
		back, err := tok.Encode()
		if err != nil {
			t.Fatalf("accepted token does not re-encode: %v", err)
		}
		if back != s {
			t.Fatalf("not canonical: %q decoded and re-encoded as %q", s, back)
		}
	})
}

func TestConfigValidate(t *testing.T) {
	pub, priv := seededKey(1)
	dir, _ := directory.NewMemory(directory.MemoryConfig{})
	ok := logintoken.VerifierConfig{Cluster: "c", Audience: "a", Keys: []ed25519.PublicKey{pub}, SingleUse: dir}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		f     func(*logintoken.VerifierConfig)
		field string
	}{
		{func(c *logintoken.VerifierConfig) { c.Cluster = "" }, "Cluster"},
		{func(c *logintoken.VerifierConfig) { c.Audience = strings.Repeat("a", 65) }, "Audience"},
		{func(c *logintoken.VerifierConfig) { c.Keys = nil }, "Keys"},
		{func(c *logintoken.VerifierConfig) { c.Keys = []ed25519.PublicKey{pub[:5]} }, "Keys"},
		{func(c *logintoken.VerifierConfig) { c.Leeway = 2 * time.Minute }, "Leeway"},
		{func(c *logintoken.VerifierConfig) { c.MaxLifetime = -1 }, "MaxLifetime"},
		{func(c *logintoken.VerifierConfig) { c.SingleUse = nil }, "SingleUse"},
	} {
		c := ok
		tc.f(&c)
		var ce *errcode.ConfigError
		if err := c.Validate(); !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, errcode.ErrConfigInvalid) {
			t.Errorf("want a config error on %s, got %v", tc.field, err)
		}
		if _, err := logintoken.NewVerifier(c); err == nil {
			t.Errorf("NewVerifier accepted an invalid %s", tc.field)
		}
	}
	iok := logintoken.IssuerConfig{Cluster: "c", Key: priv}
	if err := iok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		f     func(*logintoken.IssuerConfig)
		field string
	}{
		{func(c *logintoken.IssuerConfig) { c.Cluster = "" }, "Cluster"},
		{func(c *logintoken.IssuerConfig) { c.Key = priv[:32] }, "Key"},
		{func(c *logintoken.IssuerConfig) { c.TTL = time.Microsecond }, "TTL"},
	} {
		c := iok
		tc.f(&c)
		var ce *errcode.ConfigError
		if err := c.Validate(); !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("want a config error on %s, got %v", tc.field, err)
		}
	}
}
