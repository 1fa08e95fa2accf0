package wander_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/examples/wander"
	"github.com/shardwise/shardwise/zone"
)

// forgetful is a module whose one component says neither how it is
// handed over nor that it is not: the runtime refuses to boot it.
type forgetful struct{}

func (forgetful) Setup(r *zone.Runtime) error {
	_, err := zone.Register(r, zone.Spec[wander.Mood]{Name: "forgetful.mood"})
	return err
}

func TestBootRefusesAComponentWithoutHandoff(t *testing.T) {
	_, err := zone.New(zone.Config{}, forgetful{})
	if errcode.Of(err) != zone.CodeNoCodec {
		t.Fatalf("zone.New: %v, want %s", err, zone.CodeNoCodec)
	}
}

var (
	goBlockRE = regexp.MustCompile("(?ms)^```go\n(.*?)^```\n")
	sourceRE  = regexp.MustCompile("^From `([^`]+\\.go)`")
)

// TestModulesDocQuotesTheCode: every Go block of docs/modules.md is
// introduced by the line "From `FILE`…" and appears in FILE verbatim, so
// the guide cannot drift from the compiled and tested example it walks
// through. A block from nowhere, or one the code no longer holds, fails.
func TestModulesDocQuotesTheCode(t *testing.T) {
	const root = "../.."
	doc, err := os.ReadFile(filepath.Join(root, "docs", "modules.md"))
	if err != nil {
		t.Fatal(err)
	}
	quoted := map[string]int{}
	for _, m := range goBlockRE.FindAllSubmatchIndex(doc, -1) {
		block := string(doc[m[2]:m[3]])
		before := strings.TrimRight(string(doc[:m[0]]), "\n")
		intro := before[strings.LastIndex(before, "\n")+1:]
		line := 1 + strings.Count(string(doc[:m[0]]), "\n")
		src := sourceRE.FindStringSubmatch(intro)
		if src == nil {
			t.Errorf("docs/modules.md:%d: a Go block not introduced by \"From `FILE`\": %q", line, intro)
			continue
		}
		code, err := os.ReadFile(filepath.Join(root, src[1]))
		if err != nil {
			t.Errorf("docs/modules.md:%d: %v", line, err)
			continue
		}
		if !strings.Contains(string(code), block) {
			t.Errorf("docs/modules.md:%d: the block is not in %s as quoted (the code changed: copy it again):\n%s", line, src[1], block)
		}
		quoted[src[1]]++
	}
	for _, f := range []string{"examples/wander/wander.go", "examples/wander/cmd/wander-zone/main.go", "examples/wander/modulesdoc_test.go"} {
		if quoted[f] == 0 {
			t.Errorf("docs/modules.md quotes nothing of %s, the example it walks through", f)
		}
	}
}
