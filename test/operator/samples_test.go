package operator_test

import (
	"io"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// TestSamplesWithKubectl applies config/samples with kubectl --dry-run=server in a
// namespace the webhook does not cover: the CRD alone accepts the valid sample and
// refuses the invalid one, as it does with no operator running.
func TestSamplesWithKubectl(t *testing.T) {
	needControlPlane(t)
	kubectl := func(args ...string) (string, error) {
		user, err := env.ControlPlane.AddUser(envtest.User{Name: "samples", Groups: []string{"system:masters"}}, nil)
		if err != nil {
			return "", err
		}
		k, err := user.Kubectl()
		if err != nil {
			return "", err
		}
		stdout, stderr, err := k.Run(args...)
		out, _ := io.ReadAll(stdout)
		errOut, _ := io.ReadAll(stderr)
		return string(out) + string(errOut), err
	}
	out, err := kubectl("apply", "--dry-run=server", "-n", "cel-only", "-f", "../../config/samples/ferrofed_v1alpha1_gateway.yaml")
	if err != nil {
		t.Errorf("the valid sample was refused: %v\n%s", err, out)
	}
	out, err = kubectl("apply", "--dry-run=server", "-n", "cel-only", "-f", "../../config/samples/ferrofed_v1alpha1_storedquery.yaml")
	if err != nil {
		t.Errorf("the StoredQuery sample was refused: %v\n%s", err, out)
	}
	out, err = kubectl("apply", "--dry-run=server", "-n", "cel-only", "-f", "../../config/samples/invalid/")
	t.Logf("kubectl apply --dry-run=server -f config/samples/invalid/:\n%s", out)
	if err == nil || !strings.Contains(out, "spec.lifecycle.terminationGracePeriodSeconds must be greater than") ||
		!strings.Contains(out, "must not be shorter than spec.lifecycle.requestTimeout") {
		t.Errorf("the invalid sample was not refused by both CEL rules: %v", err)
	}
}
