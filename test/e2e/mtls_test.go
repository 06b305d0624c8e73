//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ferrofed/ferrofed/test/rollout"
)

const mtlsGatewayName = "e2e-mtls"

// mutualTLS: a Gateway with spec.tls.clientCASecret requires client certificates, which
// the kubelet's HTTPS probes cannot present; it becomes Ready through exec probes
// running `ferrofed healthcheck` with the identity of spec.tls.healthcheckIdentitySecret.
// A client without a certificate is refused at the handshake; one with a certificate
// of the CA is served.
func (s *e2e) mutualTLS(t *testing.T) {
	ctx := context.Background()
	ca, err := newTLSAuthority()
	if err != nil {
		t.Fatal(err)
	}
	servingCert, servingKey, err := ca.issueFor(2001, mtlsGatewayName, x509.ExtKeyUsageServerAuth)
	if err != nil {
		t.Fatal(err)
	}
	probeCert, probeKey, err := ca.issueFor(2002, "ferrofed healthcheck", x509.ExtKeyUsageClientAuth)
	if err != nil {
		t.Fatal(err)
	}
	clientCert, clientKey, err := ca.issueFor(2003, "e2e client", x509.ExtKeyUsageClientAuth)
	if err != nil {
		t.Fatal(err)
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})
	secrets := s.c.kube.CoreV1().Secrets(cfg.namespace)
	for _, sec := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: mtlsGatewayName + "-serving"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: servingCert, corev1.TLSPrivateKeyKey: servingKey}},
		// The CA under a key of its own name, to show spec.tls.clientCASecret.key works.
		{ObjectMeta: metav1.ObjectMeta{Name: mtlsGatewayName + "-client-ca"}, Data: map[string][]byte{"clients.pem": caPEM}},
		{ObjectMeta: metav1.ObjectMeta{Name: mtlsGatewayName + "-healthcheck"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: probeCert, corev1.TLSPrivateKeyKey: probeKey}},
	} {
		if _, err := secrets.Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	spec := s.gatewaySpec("")
	spec["replicas"] = 1
	spec["tls"] = map[string]any{
		"secretName":                mtlsGatewayName + "-serving",
		"clientCASecret":            map[string]any{"name": mtlsGatewayName + "-client-ca", "key": "clients.pem"},
		"healthcheckIdentitySecret": mtlsGatewayName + "-healthcheck",
	}
	created := time.Now()
	if err := s.c.createGateway(ctx, gatewayObject(cfg.namespace, mtlsGatewayName, spec)); err != nil {
		t.Fatalf("create Gateway: %v", err)
	}
	gw := s.readyGateway(t, mtlsGatewayName, cfg.stepTimeout)
	ready := time.Since(created)
	// Ready through exec probes: the pod carries no HTTP probe at all.
	pods, err := s.c.kube.CoreV1().Pods(cfg.namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + mtlsGatewayName})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("mutual-TLS gateway pods: %d, %v", len(pods.Items), err)
	}
	pod := pods.Items[0]
	c := pod.Spec.Containers[0]
	for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.Exec == nil || p.HTTPGet != nil {
			t.Errorf("%s probe = %+v, want an exec probe", name, p)
			continue
		}
		t.Logf("%s probe: exec %s (timeoutSeconds %d)", name, strings.Join(p.Exec.Command, " "), p.TimeoutSeconds)
	}
	if !rollout.PodReady(&pod) {
		t.Errorf("pod %s is not Ready", pod.Name)
	}
	if cs := pod.Status.ContainerStatuses; len(cs) == 0 || cs[0].RestartCount != 0 {
		t.Errorf("the gateway container restarted (a failing liveness probe?): %+v", cs)
	}

	svc, err := s.c.ownedService(ctx, gw)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	eventually(t, time.Minute, "the mutual-TLS gateway pod in its Service's endpoints", func(ctx context.Context) (bool, string, error) {
		addrs, err = rollout.EndpointAddrs(ctx, s.c.kube, svc)
		return len(addrs) == 1, fmt.Sprintf("endpoints %v", addrs), err
	})
	if local, why := rollout.OnThisMachine(addrs); !local {
		skipOffMachine(t, "the mutual-TLS gateway's Service is not reachable from this machine: "+why)
	}
	base := "https://" + net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(svc.Spec.Ports[0].Port))
	client := func(certs []tls.Certificate) *http.Client {
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
			TLSClientConfig: &tls.Config{RootCAs: ca.pool, ServerName: mtlsGatewayName, MinVersion: tls.VersionTLS12, Certificates: certs}}}
	}
	get := func(certs []tls.Certificate) (int, error) {
		resp, err := client(certs).Get(base + "/health")
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	pair, err := tls.X509KeyPair(clientCert, clientKey)
	if err != nil {
		t.Fatal(err)
	}
	// A client with a certificate first, until kube-proxy leads the Service to the pod:
	// before that every connection is refused, and a refusal would prove nothing below.
	eventually(t, 2*time.Minute, "the mutual-TLS gateway's Service routing to it", func(ctx context.Context) (bool, string, error) {
		ok, why := rollout.RoutedVia(ctx, client([]tls.Certificate{pair}), base, 5)
		return ok, why, nil
	})
	code, refused := get(nil)
	switch {
	case refused == nil:
		t.Errorf("a client without a certificate was answered %d", code)
	case !isTLSRefusal(refused):
		t.Errorf("a client without a certificate: %v, want the handshake refused for want of a certificate", refused)
	default:
		t.Logf("a client without a certificate: %v", refused)
	}
	if code, err := get([]tls.Certificate{pair}); err != nil || code != http.StatusOK {
		t.Errorf("a client with a certificate of the client CA: %d, %v; want 200", code, err)
	}
	s.summary = append(s.summary, fmt.Sprintf("e2e mutual TLS: Ready through exec probes after %s; without a client certificate: refused (%v); with one: 200",
		ready.Round(time.Second), refused))
	_ = s.c.dyn.Resource(gatewayGVR).Namespace(cfg.namespace).Delete(ctx, mtlsGatewayName, metav1.DeleteOptions{})
}

// isTLSRefusal reports whether err is the server refusing the TLS handshake (a TLS
// alert: certificate required, bad certificate, or the connection closed by the
// server during the handshake), not a connection that never reached it.
func isTLSRefusal(err error) bool {
	var alert tls.AlertError
	if errors.As(err, &alert) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return false // refused, unreachable: nothing answered
	}
	msg := err.Error()
	return strings.Contains(msg, "tls: ") || strings.Contains(msg, "remote error") || strings.Contains(msg, "connection reset") || strings.Contains(msg, "EOF")
}
