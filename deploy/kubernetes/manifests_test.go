package kubernetes_test

import (
	"bufio"
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	k8sjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/link"
	"github.com/shardwise/shardwise/nodename"
)

// shardwiseImage is the image the manifests run the shardwise command
// from; a container of another image (etcd, Valkey, PostgreSQL) is not
// checked against shardwise's flags.
const shardwiseImage = "shardwise"

// kinds are the objects the manifests may hold, each decoded into its API
// type. A kind not here is an error: the test would not check it.
var kinds = map[string]func() runtime.Object{
	"v1/Service":                    func() runtime.Object { return new(corev1.Service) },
	"v1/ConfigMap":                  func() runtime.Object { return new(corev1.ConfigMap) },
	"v1/Secret":                     func() runtime.Object { return new(corev1.Secret) },
	"apps/v1/StatefulSet":           func() runtime.Object { return new(appsv1.StatefulSet) },
	"apps/v1/Deployment":            func() runtime.Object { return new(appsv1.Deployment) },
	"batch/v1/Job":                  func() runtime.Object { return new(batchv1.Job) },
	"policy/v1/PodDisruptionBudget": func() runtime.Object { return new(policyv1.PodDisruptionBudget) },
}

// strictYAML decodes YAML into the API types as the API server does with
// field validation Strict: a field the type does not have, or one given
// twice, is an error naming its path ("spec.replica").
var strictYAML = func() runtime.Decoder {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, policyv1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	return k8sjson.NewSerializerWithOptions(k8sjson.DefaultMetaFactory, scheme, scheme, k8sjson.SerializerOptions{Yaml: true, Strict: true})
}()

// decode reads every document of a manifest file strictly into its API
// type: an unknown or duplicated field, a wrong type or an unknown kind is
// an error naming the file and the document.
func decode(file string, data []byte) ([]any, error) {
	var objs []any
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, i, err)
		}
		var generic any
		if err := yaml.Unmarshal(doc, &generic); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, i, err)
		}
		if generic == nil {
			continue // only comments
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, i, err)
		}
		newObj, ok := kinds[tm.APIVersion+"/"+tm.Kind]
		if !ok {
			return nil, fmt.Errorf("%s: document %d: kind %q of apiVersion %q is not one this test checks", file, i, tm.Kind, tm.APIVersion)
		}
		obj, _, err := strictYAML.Decode(doc, nil, newObj())
		if err != nil {
			return nil, fmt.Errorf("%s: document %d (%s): %w", file, i, tm.Kind, err)
		}
		objs = append(objs, obj)
	}
}

// workload is a StatefulSet, Deployment or Job: the pods it makes.
type workload struct {
	kind, name  string
	replicas    int
	serviceName string   // StatefulSet
	claims      []string // StatefulSet: its volumeClaimTemplates, volumes of each pod
	pod         corev1.PodTemplateSpec
	longRunning bool // not a Job: probes are required
}

// manifests is every object of the directory plus the Secrets secrets.sh
// writes, by kind and name.
type manifests struct {
	workloads  []workload
	services   map[string]*corev1.Service
	configMaps map[string]*corev1.ConfigMap
	secrets    map[string]*corev1.Secret
	pdbs       []*policyv1.PodDisruptionBudget
}

func collect(objs []any) (*manifests, error) {
	m := &manifests{services: map[string]*corev1.Service{}, configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}}
	seen := map[string]bool{}
	for _, o := range objs {
		var kind, name string
		switch o := o.(type) {
		case *corev1.Service:
			kind, name = "Service", o.Name
			m.services[o.Name] = o
		case *corev1.ConfigMap:
			kind, name = "ConfigMap", o.Name
			m.configMaps[o.Name] = o
		case *corev1.Secret:
			kind, name = "Secret", o.Name
			m.secrets[o.Name] = o
		case *policyv1.PodDisruptionBudget:
			kind, name = "PodDisruptionBudget", o.Name
			m.pdbs = append(m.pdbs, o)
		case *appsv1.StatefulSet:
			kind, name = "StatefulSet", o.Name
			m.workloads = append(m.workloads, workload{kind: kind, name: o.Name, replicas: int(ptrOr(o.Spec.Replicas, 1)), serviceName: o.Spec.ServiceName, pod: o.Spec.Template, longRunning: true, claims: claimNames(o)})
		case *appsv1.Deployment:
			kind, name = "Deployment", o.Name
			m.workloads = append(m.workloads, workload{kind: kind, name: o.Name, replicas: int(ptrOr(o.Spec.Replicas, 1)), pod: o.Spec.Template, longRunning: true})
		case *batchv1.Job:
			kind, name = "Job", o.Name
			m.workloads = append(m.workloads, workload{kind: kind, name: o.Name, replicas: 1, pod: o.Spec.Template})
		}
		if name == "" {
			return nil, fmt.Errorf("a %s without a name", kind)
		}
		if seen[kind+"/"+name] {
			return nil, fmt.Errorf("%s %s defined twice", kind, name)
		}
		seen[kind+"/"+name] = true
	}
	return m, nil
}

func claimNames(s *appsv1.StatefulSet) []string {
	var names []string
	for _, c := range s.Spec.VolumeClaimTemplates {
		names = append(names, c.Name)
	}
	return names
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// cliFlags are the flags of the shardwise command lines the manifests run,
// by command ("zone", "regions apply"): whether each takes a value.
type cliFlags map[string]map[string]bool

// helpFlagRE matches a flag line of cobra's help: "  -o, --output string".
var helpFlagRE = regexp.MustCompile(`(?m)^\s+(?:-[a-zA-Z], )?--([a-z0-9][a-z0-9-]*)(?: ([a-zA-Z]+))?`)

// readFlags runs "shardwise CMD --help" and reads its flags (the
// command's own and those it inherits).
func readFlags(bin string, cmd []string) (map[string]bool, error) {
	out, err := exec.Command(bin, append(slices.Clone(cmd), "--help")...).Output()
	if err != nil {
		return nil, fmt.Errorf("shardwise %s --help: %w", strings.Join(cmd, " "), err)
	}
	if !bytes.Contains(out, []byte("Usage:\n  shardwise "+strings.Join(cmd, " "))) {
		return nil, fmt.Errorf("shardwise %s --help is not that command's help:\n%s", strings.Join(cmd, " "), out)
	}
	flags := map[string]bool{}
	for _, m := range helpFlagRE.FindAllSubmatch(out, -1) {
		flags[string(m[1])] = len(m[2]) > 0
	}
	return flags, nil
}

// parsedArgs is a shardwise container's command line.
type parsedArgs struct {
	command    []string          // "zone", or "regions", "apply"
	flags      map[string]string // flag (no dashes) to value; "true" for a bool flag
	positional []string
}

// parseArgs splits args into the subcommand, the flags and the positional
// arguments, refusing any flag the command does not have.
func parseArgs(args []string, cli cliFlags) (parsedArgs, error) {
	p := parsedArgs{flags: map[string]string{}}
	// The longest run of leading words that names a known command.
	i := 0
	for j := 1; j <= len(args); j++ {
		if cli[strings.Join(args[:j], " ")] != nil {
			i = j
		}
	}
	p.command = args[:i]
	cmd := strings.Join(p.command, " ")
	known := cli[cmd]
	if known == nil {
		return p, fmt.Errorf("args %q: not a shardwise command this test knows (add it to commandsUsed)", args)
	}
	for ; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "--") {
			p.positional = append(p.positional, a)
			continue
		}
		name, value, hasValue := strings.Cut(a[2:], "=")
		takesValue, ok := known[name]
		_, dup := p.flags[name]
		switch {
		case !ok:
			return p, fmt.Errorf("--%s is not a flag of shardwise %s", name, cmd)
		case dup:
			return p, fmt.Errorf("--%s given twice", name)
		case takesValue && !hasValue:
			if i+1 == len(args) {
				return p, fmt.Errorf("--%s needs a value", name)
			}
			i++
			value = args[i]
		case !takesValue && !hasValue:
			value = "true"
		}
		p.flags[name] = value
	}
	return p, nil
}

// commandsUsed are the shardwise command lines the manifests may run.
var commandsUsed = [][]string{{"zone"}, {"econ"}, {"regions", "apply"}}

// shardwiseBinary is SHARDWISE_BIN, or the command built from this
// checkout (../..).
func shardwiseBinary() (string, error) {
	if bin := os.Getenv("SHARDWISE_BIN"); bin != "" {
		return bin, nil
	}
	bin := filepath.Join(tempDir, "shardwise")
	// In the main module, whose go.sum has the command's dependencies.
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/shardwise")
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

// fixture is what every check reads: the real command's flags and the
// Secrets secrets.sh writes with its defaults, made once per test binary.
type fixture struct {
	bin     string
	cli     cliFlags
	secrets []byte   // secrets.sh's secrets.yaml
	private [][]byte // what secrets.sh tells the operator to keep out of the cluster: ca.key, login.key
	etcd    string   // the etcd release of go.mod
}

var (
	fixtureOnce sync.Once
	theFixture  *fixture
	fixtureErr  error
	tempDir     string // TestMain's, removed at the end
)

func TestMain(m *testing.M) {
	var err error
	if tempDir, err = os.MkdirTemp("", "manifests-test"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(tempDir)
	os.Exit(code)
}

// newFixture makes the fixture once for every test of the binary: the
// build and secrets.sh take seconds.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	fixtureOnce.Do(func() { theFixture, fixtureErr = makeFixture() })
	if fixtureErr != nil {
		t.Fatal(fixtureErr)
	}
	return theFixture
}

func makeFixture() (*fixture, error) {
	bin, err := shardwiseBinary()
	if err != nil {
		return nil, err
	}
	f := &fixture{bin: bin, cli: cliFlags{}}
	for _, c := range commandsUsed {
		flags, err := readFlags(bin, c)
		if err != nil {
			return nil, err
		}
		f.cli[strings.Join(c, " ")] = flags
	}
	out := filepath.Join(tempDir, "secrets")
	cmd := exec.Command("bash", "secrets.sh", out)
	cmd.Env = append(os.Environ(), "SHARDWISE="+bin)
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("secrets.sh: %v\n%s", err, b)
	}
	if f.secrets, err = os.ReadFile(filepath.Join(out, "secrets.yaml")); err != nil {
		return nil, err
	}
	for _, name := range []string{"ca.key", "login.key"} {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			return nil, err
		}
		f.private = append(f.private, bytes.TrimSpace(b))
	}
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		return nil, err
	}
	m := regexp.MustCompile(`(?m)^\s*go\.etcd\.io/etcd/server/v3 (v\S+)`).FindSubmatch(gomod)
	if m == nil {
		return nil, errors.New("go.mod requires no go.etcd.io/etcd/server/v3")
	}
	f.etcd = string(m[1])
	return f, nil
}

// readManifests is every *.yaml file of this directory, by name.
func readManifests(t *testing.T) map[string][]byte {
	t.Helper()
	names, err := filepath.Glob("*.yaml")
	if err != nil || len(names) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	files := map[string][]byte{}
	for _, n := range names {
		if files[n], err = os.ReadFile(n); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// checkAll decodes files and the fixture's Secrets and runs every check,
// returning every problem found.
func checkAll(t *testing.T, f *fixture, files map[string][]byte) []error {
	t.Helper()
	var objs []any
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range append(names, "secrets.sh's secrets.yaml") {
		data := files[n]
		if n == "secrets.sh's secrets.yaml" {
			data = f.secrets
		}
		o, err := decode(n, data)
		if err != nil {
			return []error{err}
		}
		objs = append(objs, o...)
	}
	m, err := collect(objs)
	if err != nil {
		return []error{err}
	}
	c := &checker{m: m, f: f, dir: t.TempDir()}
	c.run()
	return c.errs
}

type checker struct {
	m    *manifests
	f    *fixture
	dir  string // for certificate files
	errs []error
}

func (c *checker) errorf(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

func (c *checker) run() {
	zoneNodes := map[string]bool{}
	for _, w := range c.m.workloads {
		where := w.kind + " " + w.name
		c.checkPod(where, w)
		for _, ctr := range w.pod.Spec.Containers {
			where := where + ", container " + ctr.Name
			if image, _, _ := strings.Cut(ctr.Image, ":"); image == shardwiseImage {
				nodes := c.checkShardwise(where, w, ctr)
				if len(ctr.Args) > 0 && ctr.Args[0] == "zone" {
					for _, n := range nodes {
						zoneNodes[n] = true
					}
				}
			}
			if w.name == "etcd" {
				c.checkEtcd(where, w, ctr)
			}
		}
	}
	c.checkServices()
	c.checkPDBs()
	c.checkNoPrivateKeys()
	c.checkRegionTable(zoneNodes)
	c.checkURLs()
}

// checkPod: probes, resources, and every Secret, ConfigMap and variable
// the pod refers to.
func (c *checker) checkPod(where string, w workload) {
	volumes := map[string]corev1.Volume{}
	for _, name := range w.claims {
		volumes[name] = corev1.Volume{Name: name}
	}
	for _, v := range w.pod.Spec.Volumes {
		volumes[v.Name] = v
		switch {
		case v.Secret != nil:
			if c.m.secrets[v.Secret.SecretName] == nil {
				c.errorf("%s: volume %s: Secret %q is neither in the manifests nor written by secrets.sh", where, v.Name, v.Secret.SecretName)
			}
		case v.ConfigMap != nil:
			if c.m.configMaps[v.ConfigMap.Name] == nil {
				c.errorf("%s: volume %s: ConfigMap %q is not in the manifests", where, v.Name, v.ConfigMap.Name)
			}
		}
	}
	for _, ctr := range w.pod.Spec.Containers {
		where := where + ", container " + ctr.Name
		if w.longRunning {
			if ctr.LivenessProbe == nil {
				c.errorf("%s: no liveness probe", where)
			}
			if ctr.ReadinessProbe == nil {
				c.errorf("%s: no readiness probe", where)
			}
		}
		for _, p := range []*corev1.Probe{ctr.LivenessProbe, ctr.ReadinessProbe, ctr.StartupProbe} {
			if p == nil {
				continue
			}
			if port, ok := probePort(p); ok {
				if _, err := containerPort(ctr, port); err != nil {
					c.errorf("%s: probe: %v", where, err)
				}
			}
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := ctr.Resources.Requests[r]; !ok || q.IsZero() {
				c.errorf("%s: no %s request", where, r)
			}
		}
		env := map[string]bool{}
		for _, e := range ctr.Env {
			env[e.Name] = true
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				ref := e.ValueFrom.SecretKeyRef
				s := c.m.secrets[ref.Name]
				if s == nil {
					c.errorf("%s: env %s: Secret %q is neither in the manifests nor written by secrets.sh", where, e.Name, ref.Name)
				} else if _, ok := s.Data[ref.Key]; !ok {
					c.errorf("%s: env %s: Secret %q has no key %q", where, e.Name, ref.Name, ref.Key)
				}
			}
		}
		for _, a := range slices.Concat(ctr.Command, ctr.Args) {
			for _, m := range envRefRE.FindAllStringSubmatch(a, -1) {
				if !env[m[1]] {
					c.errorf("%s: argument %q uses $(%s), which the container's env does not define (Kubernetes would pass it literally)", where, a, m[1])
				}
			}
		}
		for _, vm := range ctr.VolumeMounts {
			if _, ok := volumes[vm.Name]; !ok {
				c.errorf("%s: mounts volume %q, which the pod does not have", where, vm.Name)
			}
		}
	}
}

var envRefRE = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

func probePort(p *corev1.Probe) (intstr.IntOrString, bool) {
	switch {
	case p.HTTPGet != nil:
		return p.HTTPGet.Port, true
	case p.TCPSocket != nil:
		return p.TCPSocket.Port, true
	case p.GRPC != nil:
		return intstr.FromInt32(p.GRPC.Port), true
	}
	return intstr.IntOrString{}, false
}

// containerPort resolves a port by name or number to the container's port
// number.
func containerPort(ctr corev1.Container, port intstr.IntOrString) (int32, error) {
	for _, p := range ctr.Ports {
		if port.Type == intstr.String && p.Name == port.StrVal || port.Type == intstr.Int && p.ContainerPort == port.IntVal {
			return p.ContainerPort, nil
		}
	}
	return 0, fmt.Errorf("port %s is not a port of container %s", portName(port), ctr.Name)
}

func portName(p intstr.IntOrString) string { return p.String() }

// portOf is the port of a host:port flag value.
func portOf(v string) (int32, error) {
	_, p, err := net.SplitHostPort(v)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("port %q must be a fixed port number", p)
	}
	return int32(n), nil
}

// checkShardwise checks one container running the shardwise command and
// returns the node names of its pods.
func (c *checker) checkShardwise(where string, w workload, ctr corev1.Container) []string {
	if len(ctr.Command) > 0 {
		c.errorf("%s: sets command %q: the image's entrypoint is shardwise, give only args", where, ctr.Command)
	}
	args, err := parseArgs(ctr.Args, c.f.cli)
	if err != nil {
		c.errorf("%s: %v", where, err)
		return nil
	}
	fieldOf := map[string]string{}
	for _, e := range ctr.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			fieldOf[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	// Every host:port a node listens on is a declared container port.
	for _, fl := range []string{"listen", "metrics", "gateway"} {
		if v, ok := args.flags[fl]; ok {
			p, err := portOf(v)
			if err != nil {
				c.errorf("%s: --%s=%s: %v", where, fl, v, err)
			} else if _, err := containerPort(ctr, intstr.FromInt32(p)); err != nil {
				c.errorf("%s: --%s=%s: %v", where, fl, v, err)
			}
		}
	}
	if v, ok := args.flags["endpoints"]; ok {
		c.checkEndpoints(where, v)
	}
	if !w.longRunning {
		return nil
	}
	// A node: its name is its pod's, it advertises its stable DNS name,
	// it has its certificate, and its probes are the node's health.
	var nodes []string
	if name := args.flags["name"]; name != "$(POD_NAME)" || fieldOf["POD_NAME"] != "metadata.name" {
		c.errorf("%s: --name=%s: must be $(POD_NAME) with POD_NAME the pod's metadata.name, so that the node name is the StatefulSet's pod name", where, name)
	}
	if w.kind != "StatefulSet" {
		c.errorf("%s: a shardwise node must be a StatefulSet pod: a %s's pod names change", where, w.kind)
		return nil
	}
	for i := range w.replicas {
		n := fmt.Sprintf("%s-%d", w.name, i)
		if err := nodename.Check("StatefulSet "+w.name+" pod name", n); err != nil {
			c.errorf("%s: %v", where, err)
		}
		nodes = append(nodes, n)
	}
	c.checkAdvertise(where, w, ctr, args)
	c.checkCerts(where, w, ctr, args, nodes)
	c.checkNodeProbes(where, ctr, args)
	if v, ok := args.flags["login-pub"]; ok {
		c.checkMountedFile(where, w, ctr, v)
	}
	return nodes
}

// checkAdvertise: --advertise is $(POD_NAME).<the StatefulSet's headless
// Service>:<the --listen port>, and that Service publishes the port.
func (c *checker) checkAdvertise(where string, w workload, ctr corev1.Container, args parsedArgs) {
	adv, listen := args.flags["advertise"], args.flags["listen"]
	host, advPort, err := net.SplitHostPort(adv)
	if err != nil {
		c.errorf("%s: --advertise=%q: %v", where, adv, err)
		return
	}
	if want := "$(POD_NAME)." + w.serviceName; host != want {
		c.errorf("%s: --advertise host %q: want %q, the pod's stable name under the StatefulSet's serviceName", where, host, want)
	}
	lp, err := portOf(listen)
	if err != nil {
		c.errorf("%s: --listen=%q: %v", where, listen, err)
		return
	}
	if advPort != strconv.Itoa(int(lp)) {
		c.errorf("%s: --advertise port %s differs from --listen port %d", where, advPort, lp)
	}
	svc := c.m.services[w.serviceName]
	if svc == nil {
		c.errorf("%s: serviceName %q: no such Service", where, w.serviceName)
		return
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		c.errorf("%s: Service %s must be headless (clusterIP: None) and publish not-ready addresses, so that peers reach a node while it joins", where, svc.Name)
	}
	found := false
	for _, sp := range svc.Spec.Ports {
		if sp.Port != lp {
			continue
		}
		if p, err := containerPort(ctr, targetOf(sp)); err == nil && p == lp {
			found = true
		}
	}
	if !found {
		c.errorf("%s: Service %s has no port %d leading to the container's --listen port", where, svc.Name, lp)
	}
}

func targetOf(sp corev1.ServicePort) intstr.IntOrString {
	if sp.TargetPort.Type == intstr.String && sp.TargetPort.StrVal == "" || sp.TargetPort.Type == intstr.Int && sp.TargetPort.IntVal == 0 {
		return intstr.FromInt32(sp.Port)
	}
	return sp.TargetPort
}

// checkCerts: --certs is a Secret's mount holding the CA and, for every
// node, a certificate naming that node and the host it advertises.
func (c *checker) checkCerts(where string, w workload, ctr corev1.Container, args parsedArgs, nodes []string) {
	dir, ok := args.flags["certs"]
	if !ok {
		c.errorf("%s: no --certs: the node link and the economy need mutual TLS between pods", where)
		return
	}
	secret := c.mountedSecret(where, w, ctr, dir)
	if secret == nil {
		return
	}
	files := filepath.Join(c.dir, secret.Name)
	if err := os.MkdirAll(files, 0o700); err != nil {
		c.errorf("%v", err)
		return
	}
	for k, v := range secret.Data {
		if err := os.WriteFile(filepath.Join(files, k), v, 0o600); err != nil {
			c.errorf("%v", err)
			return
		}
	}
	advHost, _, _ := net.SplitHostPort(args.flags["advertise"])
	for _, n := range nodes {
		cert, pool, err := link.LoadIdentity(files, n)
		if err != nil {
			c.errorf("%s: Secret %s has no certificate for node %s: %v", where, secret.Name, n, err)
			continue
		}
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			c.errorf("%s: node %s: %v", where, n, err)
			continue
		}
		if id, err := link.NodeIDFromCert(leaf); err != nil || id != n {
			c.errorf("%s: the certificate of node %s names %q (%v)", where, n, id, err)
		}
		host := strings.ReplaceAll(advHost, "$(POD_NAME)", n)
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
			c.errorf("%s: node %s advertises %s, which its certificate in Secret %s is not valid for: %v", where, n, host, secret.Name, err)
		}
	}
}

// mountedSecret is the Secret mounted at dir in the container.
func (c *checker) mountedSecret(where string, w workload, ctr corev1.Container, dir string) *corev1.Secret {
	for _, vm := range ctr.VolumeMounts {
		if filepath.Clean(vm.MountPath) != filepath.Clean(dir) {
			continue
		}
		for _, v := range w.pod.Spec.Volumes {
			if v.Name == vm.Name && v.Secret != nil {
				return c.m.secrets[v.Secret.SecretName]
			}
		}
	}
	c.errorf("%s: %s is not where a Secret is mounted", where, dir)
	return nil
}

// checkMountedFile: path is a key of a Secret mounted in the container.
func (c *checker) checkMountedFile(where string, w workload, ctr corev1.Container, path string) {
	s := c.mountedSecret(where, w, ctr, filepath.Dir(path))
	if s == nil {
		return
	}
	if _, ok := s.Data[filepath.Base(path)]; !ok {
		c.errorf("%s: %s: Secret %s mounted there has no key %s", where, path, s.Name, filepath.Base(path))
	}
}

// checkNodeProbes: liveness (and startup) on /healthz, readiness on
// /readyz, both on the --metrics port, where every node serves them.
func (c *checker) checkNodeProbes(where string, ctr corev1.Container, args parsedArgs) {
	mp, err := portOf(args.flags["metrics"])
	if err != nil {
		c.errorf("%s: --metrics=%q: %v: the probes need the node's HTTP address", where, args.flags["metrics"], err)
		return
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", ctr.LivenessProbe, "/healthz"}, {"startup", ctr.StartupProbe, "/healthz"}, {"readiness", ctr.ReadinessProbe, "/readyz"}} {
		if p.probe == nil {
			continue // a missing liveness or readiness probe is reported by checkPod
		}
		g := p.probe.HTTPGet
		if g == nil {
			c.errorf("%s: %s probe: must be an HTTP GET of %s", where, p.name, p.path)
			continue
		}
		if g.Path != p.path {
			c.errorf("%s: %s probe: path %q, want %q", where, p.name, g.Path, p.path)
		}
		if port, err := containerPort(ctr, g.Port); err != nil || port != mp {
			c.errorf("%s: %s probe: port %s is not the --metrics port %d", where, p.name, portName(g.Port), mp)
		}
	}
}

// checkEndpoints: every etcd endpoint is a member of the etcd StatefulSet
// on its client port.
func (c *checker) checkEndpoints(where, v string) {
	etcd := c.workload("StatefulSet", "etcd")
	if etcd == nil {
		c.errorf("%s: --endpoints: no etcd StatefulSet", where)
		return
	}
	for _, e := range strings.Split(v, ",") {
		u, err := url.Parse(e)
		if err != nil || u.Scheme != "http" {
			c.errorf("%s: --endpoints %q: want http://etcd-N.etcd:PORT", where, e)
			continue
		}
		ok := false
		for i := range etcd.replicas {
			if u.Hostname() == fmt.Sprintf("etcd-%d.%s", i, etcd.serviceName) {
				ok = true
			}
		}
		if !ok {
			c.errorf("%s: --endpoints %q: not a member of the etcd StatefulSet (%d replicas)", where, e, etcd.replicas)
		}
		p, _ := strconv.Atoi(u.Port())
		if _, err := containerPort(etcd.pod.Spec.Containers[0], intstr.FromInt(p)); err != nil {
			c.errorf("%s: --endpoints %q: %v", where, e, err)
		}
	}
}

func (c *checker) workload(kind, name string) *workload {
	for i, w := range c.m.workloads {
		if w.kind == kind && w.name == name {
			return &c.m.workloads[i]
		}
	}
	return nil
}

// checkEtcd: the image is the release the tests run against, and the
// initial cluster is exactly the StatefulSet's pods.
func (c *checker) checkEtcd(where string, w workload, ctr corev1.Container) {
	if _, tag, _ := strings.Cut(ctr.Image, ":"); tag != c.f.etcd {
		c.errorf("%s: image %s: want tag %s, the etcd release go.mod's tests run against", where, ctr.Image, c.f.etcd)
	}
	var want []string
	for i := range w.replicas {
		want = append(want, fmt.Sprintf("%s-%d=http://%s-%d.%s:2380", w.name, i, w.name, i, w.serviceName))
	}
	if !slices.Contains(ctr.Args, "--initial-cluster="+strings.Join(want, ",")) {
		c.errorf("%s: --initial-cluster must list the %d pods: %s", where, w.replicas, strings.Join(want, ","))
	}
}

// checkServices: every Service selects pods, and every target port is a
// port of those pods.
func (c *checker) checkServices() {
	for _, s := range c.m.services {
		pods := c.selected(s.Spec.Selector)
		if len(pods) == 0 {
			c.errorf("Service %s selects no pods of the manifests", s.Name)
			continue
		}
		for _, sp := range s.Spec.Ports {
			for _, w := range pods {
				found := false
				for _, ctr := range w.pod.Spec.Containers {
					if _, err := containerPort(ctr, targetOf(sp)); err == nil {
						found = true
					}
				}
				if !found {
					c.errorf("Service %s port %s: target %s is not a port of %s %s", s.Name, sp.Name, portName(targetOf(sp)), w.kind, w.name)
				}
			}
		}
	}
}

func (c *checker) selected(sel map[string]string) []workload {
	if len(sel) == 0 {
		return nil
	}
	var out []workload
	for _, w := range c.m.workloads {
		if labels.SelectorFromSet(sel).Matches(labels.Set(w.pod.Labels)) {
			out = append(out, w)
		}
	}
	return out
}

// checkPDBs: every StatefulSet of more than one pod has a budget, and
// every budget selects pods.
func (c *checker) checkPDBs() {
	covered := map[string]bool{}
	for _, p := range c.m.pdbs {
		if p.Spec.Selector == nil {
			c.errorf("PodDisruptionBudget %s has no selector", p.Name)
			continue
		}
		pods := c.selected(p.Spec.Selector.MatchLabels)
		if len(pods) == 0 {
			c.errorf("PodDisruptionBudget %s selects no pods of the manifests", p.Name)
		}
		for _, w := range pods {
			covered[w.kind+"/"+w.name] = true
		}
	}
	for _, w := range c.m.workloads {
		if w.kind == "StatefulSet" && w.replicas > 1 && !covered[w.kind+"/"+w.name] {
			c.errorf("StatefulSet %s (%d replicas) has no PodDisruptionBudget", w.name, w.replicas)
		}
	}
}

// checkRegionTable: the table the Job applies is valid and its owners are
// exactly the zone nodes.
func (c *checker) checkRegionTable(zoneNodes map[string]bool) {
	cm := c.m.configMaps["regions"]
	if cm == nil {
		c.errorf("no ConfigMap regions (the region table)")
		return
	}
	t, err := coord.ParseRegionsFile([]byte(cm.Data["table.yaml"]))
	if err != nil {
		c.errorf("ConfigMap regions, table.yaml: %v", err)
		return
	}
	owners := map[string]bool{}
	for _, o := range t.Owners() {
		owners[o] = true
		if !zoneNodes[o] {
			c.errorf("ConfigMap regions: owner %q is not a zone node (a pod of StatefulSet zone)", o)
		}
	}
	for n := range zoneNodes {
		if !owners[n] {
			c.errorf("ConfigMap regions: zone node %s owns no region", n)
		}
	}
}

// checkNoPrivateKeys: no Secret holds the CA key or the login private
// key, which secrets.sh leaves with the operator.
func (c *checker) checkNoPrivateKeys() {
	for _, s := range c.m.secrets {
		for k, v := range s.Data {
			for _, p := range c.f.private {
				if bytes.Contains(v, p) {
					c.errorf("Secret %s, %s: holds a private key that must stay out of the cluster (the CA's or the login key)", s.Name, k)
				}
			}
		}
	}
}

// checkURLs: the service URLs secrets.sh writes name Services of the
// manifests, on their ports.
func (c *checker) checkURLs() {
	s := c.m.secrets["shardwise-urls"]
	if s == nil {
		return // a reference to it is reported where it is made
	}
	for key, v := range s.Data {
		u, err := url.Parse(string(v))
		if err != nil {
			c.errorf("Secret shardwise-urls, %s: %v", key, err)
			continue
		}
		svc := c.m.services[u.Hostname()]
		if svc == nil {
			c.errorf("Secret shardwise-urls, %s: host %s is not a Service of the manifests", key, u.Hostname())
			continue
		}
		p, _ := strconv.Atoi(u.Port())
		if !slices.ContainsFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool { return int(sp.Port) == p }) {
			c.errorf("Secret shardwise-urls, %s: Service %s has no port %d", key, svc.Name, p)
		}
	}
}

func TestManifests(t *testing.T) {
	f := newFixture(t)
	errs := checkAll(t, f, readManifests(t))
	for _, err := range errs {
		t.Error(err)
	}
}

// TestManifestChecksBite: each check finds what it is there to find, in a
// bad manifest written inline or in one of the real ones broken on purpose.
func TestManifestChecksBite(t *testing.T) {
	f := newFixture(t)
	real := readManifests(t)
	// A small valid StatefulSet of another image, and its service, to
	// break in the inline cases.
	const inline = `
apiVersion: v1
kind: Service
metadata: {name: cache}
spec:
  selector: {app: cache}
  ports: [{name: cache, port: 6379, targetPort: cache}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: cache}
spec:
  serviceName: cache
  replicas: 1
  selector: {matchLabels: {app: cache}}
  template:
    metadata: {labels: {app: cache}}
    spec:
      containers:
        - name: cache
          image: valkey:8
          ports: [{name: cache, containerPort: 6379}]
          resources: {requests: {cpu: 100m, memory: 64Mi}}
          livenessProbe: {tcpSocket: {port: cache}}
          readinessProbe: {tcpSocket: {port: cache}}
`
	for _, tc := range []struct {
		name string
		file string // the file replaced or added
		yaml string
		want string // in one of the errors
	}{
		{"inline: valid", "cache.yaml", inline, ""},
		{"inline: unknown field", "cache.yaml", strings.Replace(inline, "  replicas: 1", "  replica: 1", 1), `unknown field "spec.replica"`},
		{"inline: misspelt probe field", "cache.yaml", strings.Replace(inline, "readinessProbe: {tcpSocket", "readinessProbe: {tcpSockt", 1), `unknown field "spec.template.spec.containers[0].readinessProbe.tcpSockt"`},
		{"inline: no readiness probe", "cache.yaml", strings.Replace(inline, "          readinessProbe: {tcpSocket: {port: cache}}\n", "", 1), "container cache: no readiness probe"},
		{"inline: no liveness probe", "cache.yaml", strings.Replace(inline, "          livenessProbe: {tcpSocket: {port: cache}}\n", "", 1), "container cache: no liveness probe"},
		{"inline: probe on an undeclared port", "cache.yaml", strings.Replace(inline, "livenessProbe: {tcpSocket: {port: cache}}", "livenessProbe: {tcpSocket: {port: 6380}}", 1), "port 6380 is not a port of container cache"},
		{"inline: no memory request", "cache.yaml", strings.Replace(inline, "cpu: 100m, memory: 64Mi", "cpu: 100m", 1), "no memory request"},
		{"inline: unknown kind", "cache.yaml", inline + "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\n", `kind "Pod"`},
		{"inline: service target port missing", "cache.yaml", strings.Replace(inline, "targetPort: cache}", "targetPort: cache2}", 1), "target cache2 is not a port"},
		{"renamed flag", "zone.yaml", strings.Replace(string(real["zone.yaml"]), "--world-store=", "--worldstore=", 1), "--worldstore is not a flag of shardwise zone"},
		{"flag of another command", "econ.yaml", strings.Replace(string(real["econ.yaml"]), "--store=", "--world-store=", 1), "--world-store is not a flag of shardwise econ"},
		{"listen port not declared", "zone.yaml", strings.Replace(string(real["zone.yaml"]), "--listen=0.0.0.0:7100", "--listen=0.0.0.0:7101", 1), "--listen=0.0.0.0:7101: port 7101"},
		{"advertise port not the listen port", "econ.yaml", strings.Replace(string(real["econ.yaml"]), "$(POD_NAME).econ:7200", "$(POD_NAME).econ:7201", 1), "--advertise port 7201 differs"},
		{"advertised host not in the certificate", "zone.yaml", strings.Replace(string(real["zone.yaml"]), "--advertise=$(POD_NAME).zone:7100", "--advertise=$(POD_NAME).zone.example:7100", 1), "is not valid for"},
		{"node name not the pod name", "zone.yaml", strings.Replace(string(real["zone.yaml"]), "- --name=$(POD_NAME)", "- --name=zone", 1), "--name=zone: must be $(POD_NAME)"},
		{"invalid node names", "econ.yaml", strings.ReplaceAll(string(real["econ.yaml"]), "name: econ\n", "name: Econ\n"), "a node name is made of"},
		{"more nodes than certificates", "zone.yaml", strings.Replace(string(real["zone.yaml"]), "replicas: 4", "replicas: 5", 1), "no certificate for node zone-4"},
		{"Secret not written", "zone.yaml", strings.Replace(string(real["zone.yaml"]), "secretName: shardwise-login", "secretName: shardwise-logins", 1), `Secret "shardwise-logins" is neither`},
		{"Secret key missing", "econ.yaml", strings.Replace(string(real["econ.yaml"]), "key: econ-store-url", "key: store-url", 1), `has no key "store-url"`},
		{"undefined variable", "zone.yaml", strings.Replace(string(real["zone.yaml"]), "$(DIRECTORY_URL)", "$(DIRECTORY)", 1), "uses $(DIRECTORY)"},
		{"readiness on /healthz", "econ.yaml", strings.Replace(string(real["econ.yaml"]), "httpGet: {path: /readyz", "httpGet: {path: /healthz", 1), `readiness probe: path "/healthz", want "/readyz"`},
		{"probe not on the metrics port", "zone.yaml", strings.Replace(string(real["zone.yaml"]), "httpGet: {path: /readyz, port: metrics}", "httpGet: {path: /readyz, port: gateway}", 1), "port gateway is not the --metrics port"},
		{"endpoint not an etcd member", "zone.yaml", strings.Replace(string(real["zone.yaml"]), "http://etcd-2.etcd:2379", "http://etcd-3.etcd:2379", 1), "not a member of the etcd StatefulSet"},
		{"etcd image not go.mod's", "etcd.yaml", regexp.MustCompile(`etcd:v[0-9.]+`).ReplaceAllString(string(real["etcd.yaml"]), "etcd:v3.5.0"), "want tag " + f.etcd},
		{"region owner not a zone node", "regions.yaml", strings.Replace(string(real["regions.yaml"]), "zone-3, zone-3", "zone-9, zone-3", 1), `owner "zone-9" is not a zone node`},
		{"no budget", "econ.yaml", string(real["econ.yaml"])[:strings.Index(string(real["econ.yaml"]), "apiVersion: policy/v1")], "StatefulSet econ (3 replicas) has no PodDisruptionBudget"},
		{"CA key in a Secret", "leak.yaml", "apiVersion: v1\nkind: Secret\nmetadata: {name: leak}\ndata: {ca.key: " + base64.StdEncoding.EncodeToString(f.private[0]) + "}\n", "holds a private key"},
		{"service not headless", "econ.yaml", strings.Replace(string(real["econ.yaml"]), "  clusterIP: None\n", "", 1), "must be headless"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string][]byte{}
			for k, v := range real {
				files[k] = v
			}
			if string(files[tc.file]) == tc.yaml {
				t.Fatalf("the case changes nothing in %s", tc.file)
			}
			files[tc.file] = []byte(tc.yaml)
			errs := checkAll(t, f, files)
			if tc.want == "" {
				for _, err := range errs {
					t.Error(err)
				}
				return
			}
			for _, err := range errs {
				if strings.Contains(err.Error(), tc.want) {
					return
				}
			}
			t.Errorf("no error contains %q; errors: %v", tc.want, errs)
		})
	}
}

// TestSecretsAfterRotation: a node's certificate rotated with "shardwise
// certs --rotate" and its Secrets rewritten with "secrets.sh --certs" is a
// new certificate for that node alone, still valid for the host it
// advertises, and the manifests check out against it.
func TestSecretsAfterRotation(t *testing.T) {
	f := newFixture(t)
	out := filepath.Join(t.TempDir(), "secrets")
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env = append(os.Environ(), "SHARDWISE="+f.bin)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, b)
		}
	}
	run("bash", "secrets.sh", out)
	before := secretsData(t, filepath.Join(out, "secrets.yaml"))
	run(f.bin, "certs", "--dir", filepath.Join(out, "certs"), "--ca-key", filepath.Join(out, "ca.key"), "--nodes", "zone-1", "--rotate")
	run("bash", "secrets.sh", "--certs", out)
	after := secretsData(t, filepath.Join(out, "certs.yaml"))
	if len(after) != 2 || after["shardwise-zone-certs"] == nil || after["shardwise-econ-certs"] == nil {
		t.Fatalf("certs.yaml holds %d Secrets, want shardwise-zone-certs and shardwise-econ-certs", len(after))
	}
	for secret, data := range after {
		for key, v := range data {
			changed := !bytes.Equal(v, before[secret][key])
			if want := key == "zone-1.cert.pem" || key == "zone-1.key.pem"; changed != want {
				t.Errorf("%s, %s: changed %v, want %v", secret, key, changed, want)
			}
		}
		if len(data) != len(before[secret]) {
			t.Errorf("%s: %d keys, was %d", secret, len(data), len(before[secret]))
		}
	}

	// The manifests against the rotated Secrets (certs.yaml in place of
	// secrets.yaml's certificate Secrets) check out: the new certificate
	// still names zone-1.zone.
	rotated, err := os.ReadFile(filepath.Join(out, "certs.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	all, err := os.ReadFile(filepath.Join(out, "secrets.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(all), "---\n") {
		if !strings.Contains(doc, "name: shardwise-zone-certs\n") && !strings.Contains(doc, "name: shardwise-econ-certs\n") {
			rotated = append(rotated, "---\n"+doc...)
		}
	}
	g := *f
	g.secrets = rotated
	g.private = nil // another secrets.sh run: other keys
	for _, err := range checkAll(t, &g, readManifests(t)) {
		t.Error(err)
	}
}

// secretsData reads a file of Secrets strictly: Secret name, key, value.
func secretsData(t *testing.T, file string) map[string]map[string][]byte {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decode(file, b)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string][]byte{}
	for _, o := range objs {
		s, ok := o.(*corev1.Secret)
		if !ok {
			t.Fatalf("%s holds a %T", file, o)
		}
		out[s.Name] = s.Data
	}
	return out
}
