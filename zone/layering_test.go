package zone_test

import (
	"go/build"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// module is this repository's module path.
const module = "github.com/shardwise/shardwise"

// layering is what each zone package may not reach, directly or through
// this repository's packages: lower never imports higher. Package zone is
// the module runtime a game imports: not etcd (coord, zonecoord), not the
// link or gRPC (link, zonelink), not the process host (zonehost: Redis,
// SQL, the HTTP servers, webclient), not the gateway's sockets (gateway,
// the WebSocket library; zonegate adapts the runtime to a gateway), not
// Prometheus (the host's metrics), not the tools above it. The
// simulation (zonesim) runs the runtime on an in-memory network: no link,
// no etcd. The gateway role (zonegate) sits above zone and below the host:
// no link, no etcd, no host.
var layering = map[string][]string{
	"zone": {
		module + "/coord", module + "/link", module + "/zone/zonecoord", module + "/zone/zonelink",
		module + "/zone/zonehost", module + "/zone/zonecli", module + "/zone/zonetest", module + "/zone/zonesim",
		module + "/gateway", module + "/zone/zonegate", module + "/proto/clientpb", "github.com/coder/websocket",
		module + "/directory/redisdir", module + "/worldstore/sqlworld", module + "/netting/sqlstore",
		module + "/webclient", module + "/internal/nodehttp", module + "/internal/health",
		module + "/dashboard", module + "/econ", module + "/game", module + "/sim", module + "/demo",
		"go.etcd.io/", "google.golang.org/grpc", "github.com/redis/", "database/sql", "github.com/jackc/",
		"modernc.org/", "github.com/prometheus/", "github.com/spf13/",
	},
	"zone/zonegate": {
		module + "/coord", module + "/link", module + "/zone/zonecoord", module + "/zone/zonelink",
		module + "/zone/zonehost", module + "/zone/zonecli", module + "/zone/zonetest", module + "/zone/zonesim",
		module + "/webclient", "go.etcd.io/", "google.golang.org/grpc", "github.com/redis/", "database/sql",
	},
	"zone/zonelink":  {module + "/coord", module + "/zone/zonecoord", module + "/zone/zonehost", "go.etcd.io/", "github.com/redis/", "database/sql"},
	"zone/zonecoord": {module + "/link", module + "/zone/zonelink", module + "/zone/zonehost", "google.golang.org/grpc", "github.com/redis/", "database/sql"},
	"zone/zonesim":   {module + "/link", module + "/coord", module + "/zone/zonelink", module + "/zone/zonecoord", "google.golang.org/grpc", "go.etcd.io/"},
	"zone/zonehost":  {module + "/zone/zonecli", module + "/zone/zonetest", module + "/zone/zonesim", module + "/demo", module + "/dashboard"},
}

// forbidden is the rule a layering entry states: a package of this
// repository is forbidden itself, not what sits below it (link/replication
// is a leaf under link that zone may import); any other path is forbidden
// with everything below it (google.golang.org/grpc/…); a rule ending in
// "/" forbids every path that starts with it.
func forbidden(path string, rules []string) (string, bool) {
	for _, r := range rules {
		switch {
		case path == r:
			return r, true
		case strings.HasPrefix(r, module+"/"):
		case strings.HasPrefix(path, strings.TrimSuffix(r, "/")+"/"):
			return r, true
		}
	}
	return "", false
}

// TestLayering: each zone package's imports, followed through this
// repository's packages (go/build reads each package's files for this
// platform, tests excluded), reach nothing its layering rule forbids. A
// path from the package to the forbidden import is printed.
func TestLayering(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range slices.Sorted(maps.Keys(layering)) {
		t.Run(pkg, func(t *testing.T) {
			for _, v := range violations(t, root, pkg, layering[pkg]) {
				t.Error(v)
			}
		})
	}
}

// TestLayeringSeesAForbiddenImport: the walk is not vacuous. It follows
// the repository from a package that does reach the link and etcd (the
// host) and must find both.
func TestLayeringSeesAForbiddenImport(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	got := violations(t, root, "zone/zonehost", []string{module + "/link", "go.etcd.io/", "google.golang.org/grpc"})
	if len(got) != 3 {
		t.Fatalf("the walk from zone/zonehost found %d of the link, etcd and gRPC: %q", len(got), got)
	}
}

// violations walks the imports of pkg (a directory under root) through
// the repository's packages and returns one line per forbidden import
// reached, with the chain that reaches it.
func violations(t *testing.T, root, pkg string, rules []string) []string {
	t.Helper()
	var out []string
	seen := map[string]bool{}
	reported := map[string]bool{}
	var walk func(path string, chain []string)
	walk = func(path string, chain []string) {
		if seen[path] {
			return
		}
		seen[path] = true
		dir := filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(path, module+"/")))
		bp, err := build.Default.ImportDir(dir, 0)
		if err != nil {
			t.Fatalf("read package %s: %v", path, err)
		}
		for _, imp := range bp.Imports {
			next := append(slices.Clip(chain), imp)
			if r, bad := forbidden(imp, rules); bad && !reported[r] {
				reported[r] = true
				out = append(out, pkg+" reaches "+r+" through "+strings.Join(next, " → "))
			}
			if imp == module || strings.HasPrefix(imp, module+"/") {
				walk(imp, next)
			}
		}
	}
	walk(module+"/"+pkg, []string{module + "/" + pkg})
	return out
}
