package link

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/nodename"
)

// nodeURIScheme and nodeURIHost form the URI SAN that names a node:
// shardwise://node/<id>. The id is read from the verified certificate only.
const (
	nodeURIScheme = "shardwise"
	nodeURIHost   = "node"
)

// ValidNodeID reports whether id may name a node. The rule is nodename's,
// the one coord member names and region table owners follow too: 1–64
// characters from [a-z0-9._-] starting with a letter or digit, so it is safe
// in a URI path, a file name and a metric label.
func ValidNodeID(id string) bool { return nodename.Valid(id) }

// badID is the error for a node id that nodename.Check refuses at field:
// ErrBadIdentity (errors.Is, and its code) wrapping the
// *errcode.ConfigError that names field and value (errors.As).
func badID(field, id string) error {
	return fmt.Errorf("%w: %w", ErrBadIdentity, nodename.Check(field, id))
}

// NodeIDFromCert returns the node id named by cert's shardwise://node/<id>
// URI SAN. Exactly one such SAN must be present, in exactly that form
// (no query, fragment, user info or escapes), and the CN must agree.
func NodeIDFromCert(cert *x509.Certificate) (string, error) {
	id := ""
	for _, u := range cert.URIs {
		if u.Scheme != nodeURIScheme || u.Host != nodeURIHost {
			continue
		}
		if id != "" {
			return "", ErrBadIdentity.Wrap("more than one node URI")
		}
		id = u.Path
		if len(id) > 0 && id[0] == '/' {
			id = id[1:]
		}
		if !nodename.Valid(id) {
			return "", badID("URI SAN "+nodeURIScheme+"://"+nodeURIHost+"/<id>", id)
		}
		// Only the exact form Issue writes: a query, fragment, user info,
		// port or escaped path would let two spellings name one node.
		if u.String() != nodeURIScheme+"://"+nodeURIHost+"/"+id {
			return "", ErrBadIdentity.Wrap("node URI %q is not in canonical form", u.String())
		}
	}
	if id == "" {
		return "", ErrBadIdentity.Wrap("no shardwise://node/<id> URI SAN")
	}
	if cert.Subject.CommonName != id {
		return "", ErrBadIdentity.Wrap("CN %q disagrees with URI SAN %q", cert.Subject.CommonName, id)
	}
	return id, nil
}

// CA is a cluster certificate authority: every node certificate it issues
// is trusted by every other node holding its certificate.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	key     *ecdsa.PrivateKey
}

// NodeCert is one node's certificate and private key in PEM.
type NodeCert struct {
	ID      string
	CertPEM []byte
	KeyPEM  []byte
}

// TLSCertificate parses the pair for crypto/tls.
func (nc NodeCert) TLSCertificate() (tls.Certificate, error) {
	return tls.X509KeyPair(nc.CertPEM, nc.KeyPEM)
}

// NewCA creates a cluster CA (ECDSA P-256) valid from notBefore for
// validity. cluster names it in the subject.
func NewCA(cluster string, notBefore time.Time, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("link: ca key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "shardwise cluster CA " + cluster, Organization: []string{"shardwise"}},
		NotBefore:             notBefore.Add(-time.Minute),
		NotAfter:              notBefore.Add(validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("link: ca cert: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("link: ca cert: %w", err)
	}
	return &CA{Cert: cert, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}, nil
}

// Pool returns a pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Issue creates a certificate for node id, usable as TLS server and client,
// with SANs 127.0.0.1, ::1 and localhost (one machine) plus extra hosts
// (IPs or DNS names) and the URI SAN shardwise://node/<id>.
func (ca *CA) Issue(id string, notBefore time.Time, validity time.Duration, extraHosts ...string) (NodeCert, error) {
	if !nodename.Valid(id) {
		return NodeCert{}, badID("id", id)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return NodeCert{}, fmt.Errorf("link: node key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return NodeCert{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: id, Organization: []string{"shardwise"}},
		NotBefore:    notBefore.Add(-time.Minute),
		NotAfter:     notBefore.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:     []string{"localhost"},
		URIs:         []*url.URL{{Scheme: nodeURIScheme, Host: nodeURIHost, Path: "/" + id}},
	}
	for _, h := range extraHosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return NodeCert{}, fmt.Errorf("link: node cert: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return NodeCert{}, fmt.Errorf("link: node key: %w", err)
	}
	return NodeCert{
		ID:      id,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// CheckHost returns nil if h can be a certificate's SAN: an IP address or
// a DNS name (labels of letters, digits and hyphens, not starting or ending
// with a hyphen, at most 63 bytes each and 253 in all; no wildcard). The
// error is a *errcode.ConfigError naming field and h.
func CheckHost(field, h string) error {
	if net.ParseIP(h) != nil {
		return nil
	}
	if h == "" || len(h) > 253 {
		return errcode.Config(field, h, "must be an IP address or a DNS name of 1 to 253 bytes")
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return errcode.Config(field, h, "must be an IP address or a DNS name: each dot-separated label 1 to 63 letters, digits or hyphens, not starting or ending with a hyphen")
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return errcode.Config(field, h, fmt.Sprintf("must be an IP address or a DNS name: %q is not allowed in a label", c))
			}
		}
	}
	return nil
}

func newSerial() (*big.Int, error) {
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("link: serial: %w", err)
	}
	return s, nil
}

// File names inside a certificate directory.
const (
	CAFile = "ca.pem"
)

// NodeCertFile and NodeKeyFile name a node's files inside a certificate
// directory: <id>.cert.pem and <id>.key.pem. No two node names, and no
// node name and CAFile, give the same file: a node file ends in ".cert.pem"
// or ".key.pem", which CAFile and the other kind do not.
func NodeCertFile(id string) string { return id + ".cert.pem" }
func NodeKeyFile(id string) string  { return id + ".key.pem" }

// legacyCertFile and legacyKeyFile are the names before that rule (<id>.pem
// and <id>-key.pem), under which node "a-key"'s certificate was node "a"'s
// key and node "ca"'s the CA's; LoadIdentity still reads a directory written
// with them.
func legacyCertFile(id string) string { return id + ".pem" }
func legacyKeyFile(id string) string  { return id + "-key.pem" }

// WriteClusterCerts creates dir (0700) holding a new CA certificate (ca.pem)
// and, for each id, <id>.cert.pem and <id>.key.pem (0600). The CA key is not
// written: adding a node later means issuing a new cluster CA, which is the
// right trade for one machine (WriteCA with a key file keeps it). Existing
// files are never overwritten.
func WriteClusterCerts(dir, cluster string, ids []string, now time.Time, validity time.Duration) error {
	return WriteClusterCertsWithHosts(dir, cluster, ids, nil, now, validity)
}

// WriteClusterCertsWithHosts is WriteClusterCerts with extra SANs per node:
// hosts[id] lists the IP addresses and DNS names node id is reached at
// besides the loopback ones, for example the host of the address it
// advertises (a peer dialing "zone-0.zone:7100" verifies that the
// certificate names zone-0.zone). Every key of hosts must be one of ids.
func WriteClusterCertsWithHosts(dir, cluster string, ids []string, hosts map[string][]string, now time.Time, validity time.Duration) error {
	if err := checkNodes(ids, hosts); err != nil {
		return err
	}
	ca, err := NewCA(cluster, now, validity)
	if err != nil {
		return err
	}
	if err := WriteCA(dir, ca, ""); err != nil {
		return err
	}
	return WriteNodeCerts(dir, ca, ids, hosts, false, now, validity)
}

// checkNodes checks the ids and hosts WriteNodeCerts is given.
func checkNodes(ids []string, hosts map[string][]string) error {
	if len(ids) == 0 {
		return errors.New("link: no node ids")
	}
	seen := map[string]bool{}
	for i, id := range ids {
		if !nodename.Valid(id) {
			return badID(fmt.Sprintf("ids[%d]", i), id)
		}
		if seen[id] {
			return ErrBadIdentity.Wrap("node id %q given twice", id)
		}
		seen[id] = true
	}
	for id, hs := range hosts {
		if !seen[id] {
			return errcode.Config("hosts", id, "names a node that is not among the ids")
		}
		for _, h := range hs {
			if err := CheckHost(fmt.Sprintf("hosts[%s]", id), h); err != nil {
				return err
			}
		}
	}
	return nil
}

// KeyPEM returns the CA's private key in PKCS#8 PEM: whoever holds it can
// issue certificates every node of the cluster trusts.
func (ca *CA) KeyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(ca.key)
	if err != nil {
		return nil, fmt.Errorf("link: ca key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// LoadCA reads a CA from its certificate and its key (KeyPEM's form),
// refusing a key that is not the certificate's or a certificate that is
// not a CA.
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("link: the CA key is not the CA certificate's: %w", err)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("link: the CA key is a %T, not ECDSA", pair.PrivateKey)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("link: ca cert: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("link: the CA certificate is not a CA's")
	}
	b, _ := pem.Decode(certPEM)
	return &CA{Cert: cert, CertPEM: pem.EncodeToMemory(b), key: key}, nil
}

// WriteCA creates dir (0700) holding ca's certificate as ca.pem, and, if
// keyFile is not "", ca's key in keyFile (0600, outside dir: a directory
// given to the nodes must not hold the key that signs their peers). Neither
// file may exist.
func WriteCA(dir string, ca *CA, keyFile string) error {
	if keyFile != "" {
		kd, err1 := filepath.Abs(filepath.Dir(keyFile))
		dd, err2 := filepath.Abs(dir)
		if err1 == nil && err2 == nil && kd == dd {
			return errcode.Config("keyFile", keyFile, "must not be inside the certificate directory, which every node reads")
		}
		if _, err := os.Lstat(keyFile); err == nil {
			return fmt.Errorf("link: %w", &fs.PathError{Op: "create", Path: keyFile, Err: fs.ErrExist})
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("link: %w", err)
	}
	if keyFile != "" {
		k, err := ca.KeyPEM()
		if err != nil {
			return err
		}
		if err := writeNew(keyFile, k, 0o600); err != nil {
			return err
		}
	}
	return writeNew(filepath.Join(dir, CAFile), ca.CertPEM, 0o644)
}

// WriteNodeCerts issues a certificate with ca for each id (with the extra
// SANs hosts[id], as WriteClusterCertsWithHosts) into dir, which must hold
// ca's certificate as ca.pem. The other nodes' files are not touched: their
// certificates stay valid, since the CA is the same.
//
// With rotate false each id is a new node: if any id has a certificate or
// key in dir already, nothing is written. With rotate true each id must
// have both, and gets a new key and certificate (naming the hosts its old
// one named, unless hosts gives it others), each file replaced by a
// rename: the key first, then the certificate. A node reading the pair in
// between sees a new key with the old certificate, which does not load
// (tls.X509KeyPair refuses the mismatch), so it keeps the old pair until
// the new certificate is in place (CertReloader).
func WriteNodeCerts(dir string, ca *CA, ids []string, hosts map[string][]string, rotate bool, now time.Time, validity time.Duration) error {
	if err := checkNodes(ids, hosts); err != nil {
		return err
	}
	onDisk, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		return fmt.Errorf("link: %w", err)
	}
	if b, _ := pem.Decode(onDisk); b == nil || !bytes.Equal(b.Bytes, ca.Cert.Raw) {
		return fmt.Errorf("link: %s in %s is not this CA's certificate", CAFile, dir)
	}
	for _, id := range ids {
		for _, f := range []string{NodeCertFile(id), NodeKeyFile(id)} {
			_, err := os.Stat(filepath.Join(dir, f))
			switch {
			case err == nil && !rotate:
				return fmt.Errorf("link: node %q has %s in %s already (rotate its certificate instead)", id, f, dir)
			case errors.Is(err, fs.ErrNotExist) && rotate:
				return fmt.Errorf("link: node %q has no %s in %s to rotate", id, f, dir)
			case err != nil && !errors.Is(err, fs.ErrNotExist):
				return fmt.Errorf("link: %w", err)
			}
		}
	}
	for _, id := range ids {
		extra := hosts[id]
		if rotate && extra == nil {
			if extra, err = extraHosts(filepath.Join(dir, NodeCertFile(id))); err != nil {
				return err
			}
		}
		nc, err := ca.Issue(id, now, validity, extra...)
		if err != nil {
			return err
		}
		write := writeNew
		if rotate {
			write = replaceFile
		}
		if err := write(filepath.Join(dir, NodeKeyFile(id)), nc.KeyPEM, 0o600); err != nil {
			return err
		}
		if err := write(filepath.Join(dir, NodeCertFile(id)), nc.CertPEM, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// extraHosts are the SANs of the certificate in file beyond the loopback
// ones Issue always adds: what a rotation without new hosts carries over.
func extraHosts(file string) ([]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("link: %w", err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("link: %s holds no certificate", file)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("link: %s: %w", file, err)
	}
	var hosts []string
	for _, d := range cert.DNSNames {
		if d != "localhost" {
			hosts = append(hosts, d)
		}
	}
	for _, ip := range cert.IPAddresses {
		if !ip.Equal(net.IPv4(127, 0, 0, 1)) && !ip.Equal(net.IPv6loopback) {
			hosts = append(hosts, ip.String())
		}
	}
	return hosts, nil
}

// replaceFile replaces path by a file holding data, through a temporary
// file in the same directory renamed over it, so a reader sees the old
// content or the new, never part of either.
func replaceFile(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("link: %w", err)
	}
	defer os.Remove(f.Name()) // after a successful rename there is nothing to remove
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return fmt.Errorf("link: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("link: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("link: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("link: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("link: %w", err)
	}
	return nil
}

func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("link: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("link: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("link: %w", err)
	}
	return nil
}

// LoadIdentity reads node id's certificate and key and the cluster CA from
// a directory written by WriteClusterCerts (or by an older version, which
// named the node files <id>.pem and <id>-key.pem).
func LoadIdentity(dir, id string) (tls.Certificate, *x509.CertPool, error) {
	certFile, keyFile := identityFiles(dir, id)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("link: %w", err)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("link: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return tls.Certificate{}, nil, fmt.Errorf("link: %s holds no certificate", CAFile)
	}
	return cert, pool, nil
}

// identityFiles are the paths of node id's certificate and key in dir:
// the current names, or the legacy ones if only those exist.
func identityFiles(dir, id string) (certFile, keyFile string) {
	certFile, keyFile = NodeCertFile(id), NodeKeyFile(id)
	if _, err := os.Stat(filepath.Join(dir, certFile)); errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Stat(filepath.Join(dir, legacyCertFile(id))); err == nil {
			certFile, keyFile = legacyCertFile(id), legacyKeyFile(id)
		}
	}
	return filepath.Join(dir, certFile), filepath.Join(dir, keyFile)
}

// CertReloader gives node id's certificate from a certificate directory
// and reads the files again at every call, using them once they change:
// a certificate rotated on disk (WriteNodeCerts with rotate, "shardwise
// certs --rotate", a Kubernetes Secret updated in place) is presented from
// the next TLS handshake on, without a restart. Connections already made
// keep the certificate they were made with.
//
// A changed pair is used only if it loads (the key is the certificate's),
// names node id, and chains to the CA read at the start; otherwise the
// last good pair stays in use and Err says why. The CA itself is read
// once: a new CA needs a restart.
type CertReloader struct {
	dir, id string
	pool    *x509.CertPool

	mu              sync.Mutex
	certPEM, keyPEM []byte // the files cur was loaded from
	cur             *tls.Certificate
	err             error // why the files on disk are not in use, or nil
}

// NewCertReloader loads node id's certificate and the cluster CA from dir
// (as LoadIdentity does) and returns a reloader serving them.
func NewCertReloader(dir, id string) (*CertReloader, error) {
	_, pool, err := LoadIdentity(dir, id)
	if err != nil {
		return nil, err
	}
	r := &CertReloader{dir: dir, id: id, pool: pool}
	if _, err := r.Certificate(); err != nil {
		return nil, err
	}
	if r.err != nil {
		return nil, r.err
	}
	return r, nil
}

// Pool returns the cluster CA read at the start.
func (r *CertReloader) Pool() *x509.CertPool { return r.pool }

// Certificate returns the pair on disk if it changed and is valid, else
// the one in use. It fails only before any valid pair was read.
func (r *CertReloader) Certificate() (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	certFile, keyFile := identityFiles(r.dir, r.id)
	certPEM, err1 := os.ReadFile(certFile)
	keyPEM, err2 := os.ReadFile(keyFile)
	switch {
	case err1 != nil || err2 != nil:
		r.err = fmt.Errorf("link: reading node %q's certificate: %w", r.id, errors.Join(err1, err2))
	case bytes.Equal(certPEM, r.certPEM) && bytes.Equal(keyPEM, r.keyPEM):
		// unchanged: r.err still describes these files
	default:
		cert, err := r.check(certPEM, keyPEM)
		if err != nil {
			r.err = err
			break
		}
		r.cur, r.certPEM, r.keyPEM, r.err = &cert, certPEM, keyPEM, nil
	}
	if r.cur == nil {
		return nil, r.err
	}
	return r.cur, nil
}

func (r *CertReloader) check(certPEM, keyPEM []byte) (tls.Certificate, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return cert, fmt.Errorf("link: node %q's certificate and key: %w", r.id, err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return cert, fmt.Errorf("link: node %q's certificate: %w", r.id, err)
	}
	if got, err := NodeIDFromCert(leaf); err != nil || got != r.id {
		return cert, ErrBadIdentity.Wrap("the certificate in %s for node %q names %q (%v)", r.dir, r.id, got, err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: r.pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return cert, fmt.Errorf("link: node %q's certificate is not the cluster CA's: %w", r.id, err)
	}
	return cert, nil
}

// Err returns why the files on disk are not the certificate in use (a key
// and certificate that do not match, mid-rotation or by mistake; another
// node's certificate; another CA's), or nil when they are.
func (r *CertReloader) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// GetCertificate is for tls.Config.GetCertificate (a server).
func (r *CertReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.Certificate()
}

// GetClientCertificate is for tls.Config.GetClientCertificate (a client).
func (r *CertReloader) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return r.Certificate()
}
