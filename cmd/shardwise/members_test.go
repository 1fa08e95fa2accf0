package main

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

func TestMembersCmd(t *testing.T) {
	eps, c := etcdForCmdTest(t)
	a := registerForCmdTest(t, c, "zone-a")
	registerForCmdTest(t, c, "zone-b")

	out, err := runCmd(t, newMembersCmd(), "", "--endpoints", eps)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[3], "2 member(s)") {
		t.Fatalf("members output:\n%s", out)
	}
	if f := strings.Fields(lines[1]); f[0] != "0" || f[1] != "zone-a" || f[2] != "zone" || f[3] != "link=zone-a:7100" {
		t.Fatalf("first row %q", lines[1])
	}

	out, err = runCmd(t, newMembersCmd(), "", "--endpoints", eps, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		ID          int    `json:"id"`
		Name        string `json:"name"`
		Incarnation int64  `json:"incarnation"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("members -o json: %v\n%s", err, out)
	}
	if len(rows) != 2 || rows[0].Name != "zone-a" || rows[0].Incarnation != a.Incarnation() {
		t.Fatalf("rows %+v", rows)
	}

	// A member that leaves is gone from the next listing.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	out, err = runCmd(t, newMembersCmd(), "", "--endpoints", eps)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "zone-a") || !strings.Contains(out, "1 member(s)") {
		t.Fatalf("after zone-a left:\n%s", out)
	}
}

func TestMembersWait(t *testing.T) {
	eps, c := etcdForCmdTest(t)
	registerForCmdTest(t, c, "zone-a")

	_, err := runCmd(t, newMembersCmd(), "", "--endpoints", eps, "--wait", "2", "--wait-timeout", "300ms")
	wantCmdCode(t, err, "MEMBERS.NOT_READY")
	if !strings.Contains(err.Error(), "1 of 2 member(s)") || !strings.Contains(err.Error(), "zone-a") {
		t.Fatalf("the refusal does not say who joined: %v", err)
	}
	_, err = runCmd(t, newMembersCmd(), "", "--endpoints", eps, "--wait", "-1")
	wantCmdCode(t, err, "CONFIG.INVALID")
	if !strings.Contains(err.Error(), "--wait") {
		t.Fatalf("the refusal does not name --wait: %v", err)
	}

	// A wait started before the second member joins ends once it has.
	var (
		out string
		wg  sync.WaitGroup
	)
	wg.Go(func() {
		out, err = runCmd(t, newMembersCmd(), "", "--endpoints", eps, "--wait", "2", "--wait-timeout", "20s")
	})
	registerForCmdTest(t, c, "zone-b")
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "2 member(s)") {
		t.Fatalf("members --wait 2 listed:\n%s", out)
	}
}
