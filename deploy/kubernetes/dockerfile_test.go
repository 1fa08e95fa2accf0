package kubernetes_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// dockerfile is what the test reads of ../../Dockerfile: the final
// stage's instructions.
type dockerfile struct {
	runs       []string // RUN of every stage
	user       string
	entrypoint string
	expose     map[int32]bool
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	d := dockerfile{expose: map[int32]bool{}}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		instr, rest, _ := strings.Cut(line, " ")
		switch strings.ToUpper(instr) {
		case "FROM": // a new stage: the final one's settings count
			d.user, d.entrypoint, d.expose = "", "", map[int32]bool{}
		case "RUN":
			d.runs = append(d.runs, rest)
		case "USER":
			d.user = rest
		case "ENTRYPOINT":
			d.entrypoint = rest
		case "EXPOSE":
			for _, p := range strings.Fields(rest) {
				n, err := strconv.Atoi(strings.TrimSuffix(p, "/tcp"))
				if err != nil {
					t.Fatalf("EXPOSE %s: %v", p, err)
				}
				d.expose[int32(n)] = true
			}
		}
	}
	return d
}

// TestDockerfileAgreesWithTheManifests: the image that cannot be built on
// the project's machines is at least the one the manifests expect: built
// by scripts/build-static (the static build CI checks), shardwise as its
// entrypoint (the manifests give only args), a non-root numeric user (the
// pods run as non-root), every port a shardwise container declares
// exposed, and a build context that keeps every file the build reads.
func TestDockerfileAgreesWithTheManifests(t *testing.T) {
	d := readDockerfile(t)
	if !strings.Contains(strings.Join(d.runs, "\n"), "scripts/build-static") {
		t.Errorf("the Dockerfile does not build with scripts/build-static: RUN %q", d.runs)
	}
	if d.entrypoint != `["/usr/local/bin/shardwise"]` {
		t.Errorf("ENTRYPOINT %s, want [\"/usr/local/bin/shardwise\"]: the manifests give only args", d.entrypoint)
	}
	uid, _, _ := strings.Cut(d.user, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("USER %q: want a numeric non-root user (runAsNonRoot checks a number)", d.user)
	}

	objs, err := decodeAll(readManifests(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		for _, w := range workloadsOf(o) {
			for _, c := range w.pod.Spec.Containers {
				if image, _, _ := strings.Cut(c.Image, ":"); image != shardwiseImage {
					continue
				}
				for _, p := range c.Ports {
					if !d.expose[p.ContainerPort] {
						t.Errorf("%s %s: port %d (%s) is not EXPOSEd by the Dockerfile", w.kind, w.name, p.ContainerPort, p.Name)
					}
				}
				if sc := w.pod.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
					t.Errorf("%s %s: the pod does not require a non-root user", w.kind, w.name)
				}
			}
		}
	}

	// .dockerignore must not leave out a file the build reads: go.mod,
	// go.sum, scripts/build-static and every package cmd/shardwise needs.
	ignore, err := os.ReadFile("../../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.Dir}}{{end}}", "./cmd/shardwise")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	needed := []string{"go.mod", "go.sum", "scripts/build-static"}
	for _, dir := range strings.Fields(string(out)) {
		if rel, err := filepath.Rel(root, dir); err == nil && !strings.HasPrefix(rel, "..") {
			needed = append(needed, rel)
		}
	}
	for _, line := range strings.Split(string(ignore), "\n") {
		pat := strings.TrimSpace(line)
		if pat == "" || strings.HasPrefix(pat, "#") {
			continue
		}
		p := strings.TrimSuffix(strings.TrimPrefix(pat, "/"), "/")
		for _, n := range needed {
			if glob, _ := filepath.Match(p, n); glob || n == p || strings.HasPrefix(n, p+"/") {
				t.Errorf(".dockerignore leaves out %s, which the image's build reads (%s)", pat, n)
			}
		}
	}
}

// decodeAll decodes every file with decode.
func decodeAll(files map[string][]byte) ([]any, error) {
	var objs []any
	for n, data := range files {
		o, err := decode(n, data)
		if err != nil {
			return nil, err
		}
		objs = append(objs, o...)
	}
	return objs, nil
}

// workloadsOf is o as a workload, if it is one.
func workloadsOf(o any) []workload {
	m, err := collect([]any{o})
	if err != nil {
		return nil
	}
	return m.workloads
}
