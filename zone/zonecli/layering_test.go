package zonecli

import (
	"os/exec"
	"strings"
	"testing"
)

// TestZoneImportsNoCLI: invariant 3. The runtime is a library a game is
// written against; the CLI is above it and only above it. (pflag is not
// checked: the embedded etcd in coord brings it.)
func TestZoneImportsNoCLI(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH to list the imports with")
	}
	out, err := exec.Command(goTool, "list", "-deps", "github.com/shardwise/shardwise/zone").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "github.com/shardwise/shardwise/zone/zonecli" || strings.HasPrefix(dep, "github.com/spf13/cobra") {
			t.Errorf("package zone imports %s: the runtime must not depend on the CLI", dep)
		}
	}
}
