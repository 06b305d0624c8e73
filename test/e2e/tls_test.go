//go:build e2e

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ferrofed/ferrofed/test/certpool"
	"github.com/ferrofed/ferrofed/test/rollout"
)

// tlsAuthority signs the e2e gateway's serving certificates; the load trusts it alone.
type tlsAuthority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTLSAuthority() (*tlsAuthority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ferrofed e2e CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	return &tlsAuthority{cert: cert, key: key, pool: certpool.Of(cert)}, nil
}

// issue makes a serving certificate with serial for the gateway's Service name.
func (a *tlsAuthority) issue(serial int64) (certPEM, keyPEM []byte, err error) {
	return a.issueFor(serial, tlsGatewayName, x509.ExtKeyUsageServerAuth)
}

// issueFor makes a certificate with serial for name (the Service's names for a server
// certificate) with usage.
func (a *tlsAuthority) issueFor(serial int64, name string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.DNSNames = []string{name, name + "." + cfg.namespace + ".svc"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

const (
	tlsGatewayName = "e2e-tls"
	tlsSecretName  = "e2e-tls-serving"
)

// tlsRotation: a Gateway with spec.tls becomes Ready through its https probes; its
// Secret is then replaced under load, and the same pods serve the new certificate
// (the kubelet updates the Secret volume in place, the gateway reloads the key pair)
// with no failed request and no rollout. A Secret without a key pair is never mounted.
func (s *e2e) tlsRotation(t *testing.T) {
	ctx := context.Background()
	ca, err := newTLSAuthority()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.issue(1001)
	if err != nil {
		t.Fatal(err)
	}
	secrets := s.c.kube.CoreV1().Secrets(cfg.namespace)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: tlsSecretName}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}}
	if _, err := secrets.Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	spec := s.gatewaySpec("")
	spec["replicas"] = 1
	spec["tls"] = map[string]any{"secretName": tlsSecretName}
	if err := s.c.createGateway(ctx, gatewayObject(cfg.namespace, tlsGatewayName, spec)); err != nil {
		t.Fatalf("create Gateway: %v", err)
	}
	gw := s.readyGateway(t, tlsGatewayName, cfg.stepTimeout)
	svc, err := s.c.ownedService(ctx, gw)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	eventually(t, time.Minute, "the TLS gateway pod in its Service's endpoints", func(ctx context.Context) (bool, string, error) {
		addrs, err = rollout.EndpointAddrs(ctx, s.c.kube, svc)
		return len(addrs) == 1, fmt.Sprintf("endpoints %v", addrs), err
	})
	if local, why := rollout.OnThisMachine(addrs); !local {
		skipOffMachine(t, "the TLS gateway's Service is not reachable from this machine: "+why)
	}
	pods, err := s.c.kube.CoreV1().Pods(cfg.namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + tlsGatewayName})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("TLS gateway pods: %d, %v", len(pods.Items), err)
	}
	pod := pods.Items[0]
	addr := net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(svc.Spec.Ports[0].Port))

	// The load: every request a new TLS handshake, verified against the CA, the
	// certificate's serial recorded. It starts once kube-proxy leads the Service to the
	// pod (until then connections are refused, which would count as failures here).
	routeClient := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{RootCAs: ca.pool, ServerName: tlsGatewayName, MinVersion: tls.VersionTLS12}}}
	eventually(t, 2*time.Minute, "the TLS gateway's Service routing to it", func(ctx context.Context) (bool, string, error) {
		ok, why := rollout.RoutedVia(ctx, routeClient, "https://"+addr, 20)
		return ok, why, nil
	})
	var (
		requests, failures atomic.Int64
		mu                 sync.Mutex
		serials            = map[string]int{}
		firstFailure       string
	)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{RootCAs: ca.pool, ServerName: tlsGatewayName, MinVersion: tls.VersionTLS12}}}
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for loadCtx.Err() == nil && requests.Load() < 60000 { // bounded: 4 clients at most ~50/s each for the ≤ 4 min wait
				requests.Add(1)
				res, err := client.Get("https://" + addr + "/health")
				if err != nil {
					if loadCtx.Err() != nil {
						return
					}
					failures.Add(1)
					mu.Lock()
					if firstFailure == "" {
						firstFailure = err.Error()
					}
					mu.Unlock()
					continue
				}
				res.Body.Close()
				mu.Lock()
				if res.StatusCode != http.StatusOK {
					failures.Add(1)
					if firstFailure == "" {
						firstFailure = res.Status
					}
				} else if res.TLS != nil && len(res.TLS.PeerCertificates) > 0 {
					serials[res.TLS.PeerCertificates[0].SerialNumber.String()]++
				}
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	seen := func(serial string) bool { mu.Lock(); defer mu.Unlock(); return serials[serial] > 0 }
	eventually(t, time.Minute, "the first certificate served", func(context.Context) (bool, string, error) {
		return seen("1001"), fmt.Sprintf("serials %v", serials), nil
	})

	newCert, newKey, err := ca.issue(1002)
	if err != nil {
		t.Fatal(err)
	}
	rotated := time.Now()
	secret.Data = map[string][]byte{corev1.TLSCertKey: newCert, corev1.TLSPrivateKeyKey: newKey}
	if _, err := secrets.Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The kubelet refreshes a Secret volume on its pod sync (about a minute), then the
	// gateway polls its files every second.
	eventually(t, 4*time.Minute, "the rotated certificate served", func(context.Context) (bool, string, error) {
		mu.Lock()
		defer mu.Unlock()
		return serials["1002"] > 0, fmt.Sprintf("serials %v, %d requests, %d failed", serials, requests.Load(), failures.Load()), nil
	})
	took := time.Since(rotated)
	time.Sleep(2 * time.Second) // a little load on the new certificate too
	stopLoad()
	wg.Wait()

	after, err := s.c.kube.CoreV1().Pods(cfg.namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the gateway pod %s is gone: the rotation rolled it (%v)", pod.Name, err)
	}
	if after.UID != pod.UID || len(after.Status.ContainerStatuses) == 0 || after.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the gateway pod was replaced or restarted by the rotation: uid %s→%s, status %+v", pod.UID, after.UID, after.Status.ContainerStatuses)
	}
	if n := failures.Load(); n != 0 {
		t.Errorf("%d of %d requests failed across the rotation; the first: %s", n, requests.Load(), firstFailure)
	}
	s.summary = append(s.summary, fmt.Sprintf("e2e TLS rotation: Secret replaced, new certificate served after %s by the same pod, requests=%d failures=%d serials=%v",
		took.Round(time.Second), requests.Load(), failures.Load(), serials))

	s.opaqueSecretIsNeverMounted(t)
}

// opaqueSecretIsNeverMounted: a Gateway naming a Secret without tls.crt and tls.key
// gets a pod that cannot mount it, so the Secret's keys never reach the container.
func (s *e2e) opaqueSecretIsNeverMounted(t *testing.T) {
	ctx := context.Background()
	const name = "e2e-opaque"
	opaque := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-secret"},
		Data: map[string][]byte{"password": []byte("hunter2")}}
	if _, err := s.c.kube.CoreV1().Secrets(cfg.namespace).Create(ctx, opaque, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	spec := s.gatewaySpec("")
	spec["replicas"] = 1
	spec["tls"] = map[string]any{"secretName": opaque.Name}
	if err := s.c.createGateway(ctx, gatewayObject(cfg.namespace, name, spec)); err != nil {
		t.Fatalf("create Gateway: %v", err)
	}
	eventually(t, 2*time.Minute, "the pod's mount of a Secret without a key pair refused", func(ctx context.Context) (bool, string, error) {
		evs, err := s.c.kube.CoreV1().Events(cfg.namespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedMount"})
		if err != nil {
			return false, "", err
		}
		for _, e := range evs.Items {
			if strings.HasPrefix(e.InvolvedObject.Name, name+"-") && strings.Contains(e.Message, "tls.crt") {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d FailedMount events, none for %s naming tls.crt", len(evs.Items), name), nil
	})
	gw, err := s.c.getGateway(ctx, cfg.namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	if st, reason := rollout.Condition(gw, "Ready"); st == "True" {
		t.Errorf("a Gateway whose Secret holds no key pair is Ready (%s)", reason)
	}
	_ = s.c.dyn.Resource(gatewayGVR).Namespace(cfg.namespace).Delete(ctx, name, metav1.DeleteOptions{})
}
