package zone_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonesim"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of the scenario scripts (testdata/scenarios) with what they print now")

// scenarioFiles are the scripts in testdata/scenarios.
func scenarioFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "scenarios", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario scripts: %v", err)
	}
	return files
}

// runScenario runs the script at path with plant (a Runtime.Plant
// variant, or "") on every node, and returns its steps, what each
// printed (an error as "error: …"), and the trailing comment.
func runScenario(t *testing.T, path, plant string) ([]zonesim.Step, []string, string) {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	steps, tail, err := zonesim.ParseScript(path, string(text))
	if err != nil {
		t.Fatal(err)
	}
	cfg := zonesim.ScenarioConfig{}
	if plant != "" {
		cfg.Started = func(_ string, r *zone.Runtime) { r.Plant(plant) }
	}
	s := zonesim.NewScenario(cfg)
	defer s.Close()
	got := make([]string, len(steps))
	for i, st := range steps {
		out, err := s.Exec(st)
		if err != nil {
			out = "error: " + err.Error()
		}
		got[i] = out
	}
	return steps, got, tail
}

// bitesOf is the variants a script's header names ("# bites: a, b"): the
// script must fail with each planted.
func bitesOf(steps []zonesim.Step) []string {
	if len(steps) == 0 {
		return nil
	}
	for _, l := range strings.Split(steps[0].Comment, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "# bites:"); ok {
			var out []string
			for _, b := range strings.Split(v, ",") {
				if b = strings.TrimSpace(b); b != "" {
					out = append(out, b)
				}
			}
			return out
		}
	}
	return nil
}

// TestScenarios runs every scenario script in testdata/scenarios (the
// handoff and ghost scenes that have bitten, step by step, with what
// each node holds and each client is shown written out; see
// zonesim.Scenario for the commands) and compares each step's output
// with the expected; -rewrite writes what they print now.
func TestScenarios(t *testing.T) {
	if !*rewrite { // a rewrite writes the scripts TestScenariosBite reads
		t.Parallel()
	}
	for _, path := range scenarioFiles(t) {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			steps, got, tail := runScenario(t, path, "")
			if *rewrite {
				if err := os.WriteFile(path, []byte(zonesim.FormatScript(steps, got, tail)), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			for i, st := range steps {
				if got[i] != st.Expected {
					t.Errorf("%s: %s\nexpected:\n%s\ngot:\n%s", st.Pos, st.Command, st.Expected, got[i])
				}
			}
		})
	}
}

// TestScenariosBite runs each script with every variant its header names
// planted (export_test.go's Plant) and requires a step to print
// something else than expected: a script that cannot tell the bug from
// the fix proves nothing.
func TestScenariosBite(t *testing.T) {
	t.Parallel()
	for _, path := range scenarioFiles(t) {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		steps, _, err := zonesim.ParseScript(path, string(text))
		if err != nil {
			t.Fatal(err)
		}
		for _, bug := range bitesOf(steps) {
			t.Run(strings.TrimSuffix(filepath.Base(path), ".txt")+"/"+bug, func(t *testing.T) {
				steps, got, _ := runScenario(t, path, bug)
				caught := 0
				for i, st := range steps {
					if got[i] != st.Expected {
						caught++
						t.Logf("%s caught at %s: %s\nexpected:\n%s\ngot:\n%s", bug, st.Pos, st.Command, st.Expected, got[i])
					}
				}
				if caught == 0 {
					t.Errorf("%s planted: every step printed what the script expects", bug)
				}
			})
		}
	}
}
