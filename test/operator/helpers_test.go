package operator_test

import (
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/test/double"
	"github.com/ferrofed/ferrofed/test/doubles/issuer"
)

// ctrlLogger logs errors only, or everything with FERROFED_TEST_LOG=1.
func ctrlLogger() logr.Logger {
	level := zapcore.ErrorLevel
	if os.Getenv("FERROFED_TEST_LOG") != "" {
		level = zapcore.DebugLevel
	}
	return zap.New(zap.WriteTo(os.Stderr), zap.Level(level))
}

func newGateway(namespace, name string, mutate func(*ferrofedv1alpha1.Gateway)) *ferrofedv1alpha1.Gateway {
	gw := &ferrofedv1alpha1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       ferrofedv1alpha1.GatewaySpec{Image: "ghcr.io/ferrofed/ferrofed:test", Config: withIssuer("")},
	}
	if mutate != nil {
		mutate(gw)
	}
	return gw
}

// withIssuer is the inline configuration toml with the issuer every test Gateway
// trusts (issuer.RemoteTable): the data plane asks for a bearer token by default, and
// a configuration with no issuer to verify it is refused (docs/operator.md, "The data
// plane's issuer"; TestTheDataPlaneNeedsAnIssuer).
func withIssuer(toml string) *ferrofedv1alpha1.GatewayConfig {
	return &ferrofedv1alpha1.GatewayConfig{Inline: ptr.To(issuer.WithRemote(toml))}
}

func dur(s string) *metav1.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return &metav1.Duration{Duration: d}
}

// eventually retries check until it returns nil or timeout passes (double.EventuallyWithin),
// failing with check's last error.
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	var err error
	double.EventuallyWithin(t, timeout, what, func() bool { err = check(); return err == nil }, func() string { return err.Error() })
}
