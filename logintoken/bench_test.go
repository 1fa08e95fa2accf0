package logintoken_test

import (
	"context"
	"crypto/ed25519"
	"testing"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/logintoken"
)

func benchRig(b *testing.B) (*logintoken.Issuer, *logintoken.Verifier) {
	b.Helper()
	fc := clock.NewFake(start)
	dir, err := directory.NewMemory(directory.MemoryConfig{Clock: fc})
	if err != nil {
		b.Fatal(err)
	}
	pub, priv := seededKey(1)
	iss, err := logintoken.NewIssuer(logintoken.IssuerConfig{Cluster: "prod-eu", Key: priv, Clock: fc})
	if err != nil {
		b.Fatal(err)
	}
	v, err := logintoken.NewVerifier(logintoken.VerifierConfig{Cluster: "prod-eu", Audience: "gateway",
		Keys: []ed25519.PublicKey{pub}, SingleUse: dir, Clock: fc})
	if err != nil {
		b.Fatal(err)
	}
	return iss, v
}

// BenchmarkCheck: decode + signature + claims, no single-use claim.
func BenchmarkCheck(b *testing.B) {
	iss, v := benchRig(b)
	tok, _, _ := iss.Issue(1001, "gateway")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Check(tok); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerify: Check plus the single-use claim in the in-process
// directory (each iteration a fresh token, issued outside the timer).
func BenchmarkVerify(b *testing.B) {
	iss, v := benchRig(b)
	toks := make([]string, 0, 1024)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if len(toks) == 0 {
			b.StopTimer()
			for range cap(toks) {
				t, _, _ := iss.Issue(1001, "gateway")
				toks = append(toks, t)
			}
			b.StartTimer()
		}
		if _, err := v.Verify(ctx, toks[len(toks)-1]); err != nil {
			b.Fatal(err)
		}
		toks = toks[:len(toks)-1]
	}
}

func BenchmarkDecode(b *testing.B) {
	iss, _ := benchRig(b)
	tok, _, _ := iss.Issue(1001, "gateway")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := logintoken.Decode(tok); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkIssue(b *testing.B) {
	iss, _ := benchRig(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := iss.Issue(1001, "gateway"); err != nil {
			b.Fatal(err)
		}
	}
}
