package dirtest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/errcode"
)

// The resume tests' accounts, past the others'.
const (
	pat account.ID = olga + 1 + iota
	quin
	ron
	sam
	tess
	uma
)

var (
	hashA = directory.ResumeHash{0xa1, 0xa2}
	hashB = directory.ResumeHash{0xb1, 0xb2}
)

func wantRefused(t *testing.T, what string, err error, reasons ...string) {
	t.Helper()
	var re *directory.ResumeRefusedError
	if !errors.Is(err, directory.ErrResumeRefused) || errcode.Of(err) != directory.CodeResumeRefused || !errors.As(err, &re) {
		t.Fatalf("%s: err = %v (code %q), want *ResumeRefusedError", what, err, errcode.Of(err))
	}
	for _, r := range reasons {
		if re.Reason == r {
			return
		}
	}
	t.Fatalf("%s: refused as %q, want one of %q", what, re.Reason, reasons)
}

func mustArm(t *testing.T, d directory.Directory, a account.ID, e directory.Epoch, h directory.ResumeHash, window time.Duration) {
	t.Helper()
	if err := d.ArmResume(ctxOf(t), a, e, h, window); err != nil {
		t.Fatalf("ArmResume(%s, %d): %v", a, e, err)
	}
}

// A resume is a Connect that names the session it continues: a new, higher
// epoch at the new gateway, displacing the old session if its lease runs,
// and the credential is spent.
func testResumeOnce(t *testing.T, d directory.Directory, _ Controls) {
	ctx := ctxOf(t)
	s, _ := mustConnect(t, d, pat, 1)
	if _, err := d.SetMaster(ctx, pat, s.Epoch, directory.Route{Node: 3, Version: 4}); err != nil {
		t.Fatal(err)
	}
	mustArm(t, d, pat, s.Epoch, hashA, time.Minute)
	r, displaced, err := d.Resume(ctx, pat, s.Epoch, hashA, 2)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if r.Epoch <= s.Epoch || r.Gateway != 2 || r.Account != pat {
		t.Fatalf("Resume = %+v after %+v, want a higher epoch at gateway 2", r, s)
	}
	if displaced.Epoch != s.Epoch || displaced.Gateway != 1 {
		t.Fatalf("Resume displaced %+v, want the session it resumed %+v", displaced, s)
	}
	if !r.HasMaster || r.Master != (directory.Route{Node: 3, Version: 4}) {
		t.Fatalf("Resume kept master %+v (has %v), want the displaced session's", r.Master, r.HasMaster)
	}
	sameSession(t, "Lookup after Resume", mustLookup(t, d, pat), r)
	_, _, err = d.Resume(ctx, pat, s.Epoch, hashA, 3)
	wantRefused(t, "a second Resume with the same credential", err, directory.ResumeSuperseded)
	_, err = d.Renew(ctx, pat, s.Epoch)
	wantStaleEpoch(t, "Renew of the resumed session", err, s.Epoch, r.Epoch)
	// The chain goes on: the new session's credential works once too.
	mustArm(t, d, pat, r.Epoch, hashB, time.Minute)
	r2, _, err := d.Resume(ctx, pat, r.Epoch, hashB, 1)
	if err != nil || r2.Epoch <= r.Epoch {
		t.Fatalf("Resume of the resumed session = %+v, %v", r2, err)
	}
}

func testResumeRefusals(t *testing.T, d directory.Directory, _ Controls) {
	ctx := ctxOf(t)
	s, _ := mustConnect(t, d, quin, 1)
	_, _, err := d.Resume(ctx, quin, s.Epoch, hashA, 2)
	wantRefused(t, "Resume with nothing armed", err, directory.ResumeUnknown)
	mustArm(t, d, quin, s.Epoch, hashA, time.Minute)
	_, _, err = d.Resume(ctx, quin, s.Epoch, hashB, 2)
	wantRefused(t, "Resume with another secret", err, directory.ResumeMismatch)
	_, _, err = d.Resume(ctx, quin, s.Epoch+1, hashA, 2)
	wantRefused(t, "Resume of an epoch never issued", err, directory.ResumeUnknown)
	// Another account's credential: the account is part of what it names.
	mustConnect(t, d, ron, 1)
	_, _, err = d.Resume(ctx, ron, s.Epoch, hashA, 2)
	wantRefused(t, "Resume of another account with quin's credential", err, directory.ResumeUnknown, directory.ResumeSuperseded)
	// A wrong guess spends nothing.
	sameSession(t, "Lookup after the refusals", mustLookup(t, d, quin), s)
	// A newer login makes the credential useless.
	s2, _ := mustConnect(t, d, quin, 3)
	_, _, err = d.Resume(ctx, quin, s.Epoch, hashA, 2)
	wantRefused(t, "Resume after a newer login", err, directory.ResumeSuperseded)
	sameSession(t, "Lookup after the refused resume", mustLookup(t, d, quin), s2)
	// Arming is fenced like any write.
	wantStaleEpoch(t, "ArmResume of a displaced session", d.ArmResume(ctx, quin, s.Epoch, hashB, time.Minute), s.Epoch, s2.Epoch)
	// A logout revokes; revoking another epoch's changes nothing.
	mustArm(t, d, quin, s2.Epoch, hashB, time.Minute)
	if err := d.RevokeResume(ctx, quin, s.Epoch); err != nil {
		t.Fatalf("RevokeResume of an older epoch: %v", err)
	}
	if err := d.RevokeResume(ctx, quin, s2.Epoch); err != nil {
		t.Fatalf("RevokeResume: %v", err)
	}
	_, _, err = d.Resume(ctx, quin, s2.Epoch, hashB, 2)
	wantRefused(t, "Resume after RevokeResume", err, directory.ResumeUnknown)
	for _, w := range []time.Duration{0, -time.Second, time.Millisecond + time.Microsecond} {
		wantInvalid(t, "ArmResume with window "+w.String(), d.ArmResume(ctx, quin, s2.Epoch, hashA, w))
	}
}

// The socket dropped and the gateway released the session, or the
// gateway died and the lease ran out: the credential outlives both.
func testResumeAfterReleaseAndExpiry(t *testing.T, d directory.Directory, c Controls) {
	ctx := ctxOf(t)
	s, _ := mustConnect(t, d, sam, 1)
	mustArm(t, d, sam, s.Epoch, hashA, time.Hour)
	if err := d.Release(ctx, sam, s.Epoch); err != nil {
		t.Fatal(err)
	}
	r, displaced, err := d.Resume(ctx, sam, s.Epoch, hashA, 2)
	if err != nil {
		t.Fatalf("Resume after Release: %v", err)
	}
	if displaced.Epoch != 0 || r.Epoch <= s.Epoch {
		t.Fatalf("Resume after Release = %+v displacing %+v", r, displaced)
	}
	mustArm(t, d, sam, r.Epoch, hashB, time.Hour)
	c.Expire(t, sam)
	r2, displaced, err := d.Resume(ctx, sam, r.Epoch, hashB, 3)
	if err != nil {
		t.Fatalf("Resume after the lease ran out: %v", err)
	}
	if displaced.Epoch != 0 || r2.Epoch <= r.Epoch || r2.Gateway != 3 {
		t.Fatalf("Resume after the lease ran out = %+v displacing %+v", r2, displaced)
	}
}

func testResumeExpiry(t *testing.T, d directory.Directory, c Controls) {
	ctx := ctxOf(t)
	s, _ := mustConnect(t, d, tess, 1)
	mustArm(t, d, tess, s.Epoch, hashA, time.Second)
	c.ExpireResume(t, tess)
	_, _, err := d.Resume(ctx, tess, s.Epoch, hashA, 2)
	wantRefused(t, "Resume after the window", err, directory.ResumeExpired, directory.ResumeUnknown)
}

func testResumeConcurrent(t *testing.T, d directory.Directory, _ Controls) {
	ctx := ctxOf(t)
	s, _ := mustConnect(t, d, uma, 1)
	mustArm(t, d, uma, s.Epoch, hashA, time.Minute)
	const n = 16
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, refused := 0, 0
	for i := range n {
		wg.Go(func() {
			_, _, err := d.Resume(ctx, uma, s.Epoch, hashA, directory.NodeID(i))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, directory.ErrResumeRefused):
				refused++
			default:
				t.Errorf("Resume: %v", err)
			}
		})
	}
	wg.Wait()
	if wins != 1 || refused != n-1 {
		t.Fatalf("%d resumes won and %d were refused, want 1 and %d", wins, refused, n-1)
	}
}
