package main

import (
	"encoding/json"
	"strings"
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
