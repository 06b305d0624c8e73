//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ferrofed/ferrofed/test/rollout"
)

// pollInterval is the operator's --dependency-poll-interval in the e2e release.
const pollInterval = 5 * time.Second

// membersReachable deletes the first member's pod (its Deployment scaled to 0), sends
// requests to it through the gateway until the replicas report it down, and waits for
// the Gateway's MembersReachable to say so, naming it, as the operator's polls read it;
// then brings it back. kubectl ferrofed status, built from the repository, shows both.
func (s *e2e) membersReachable(t *testing.T) {
	if s.baseURL == "" || s.issuer == nil {
		skipOffMachine(t, "the gateway Service or the token issuer is not reachable from this machine")
	}
	m := s.members[0]
	endpoint := m.ID + "-query"
	plugin := filepath.Join(t.TempDir(), "kubectl-ferrofed")
	if out, err := exec.Command("go", "build", "-o", plugin, filepath.Join(cfg.repoRoot, "cmd", "kubectl-ferrofed")).CombinedOutput(); err != nil {
		t.Fatalf("build kubectl-ferrofed: %v\n%s", err, out)
	}
	status := func() string {
		out, err := exec.Command(plugin, "--kubeconfig", cfg.kubeconfig, "-n", cfg.namespace, "status", gatewayName).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl ferrofed status: %v\n%s", err, out)
		}
		return string(out)
	}
	client := s.issuer.ClientToken(time.Hour)
	httpClient := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	// The report is passive: the replicas learn of a member through requests to it.
	poke := func() {
		for range 8 {
			req, _ := http.NewRequest(http.MethodGet, s.baseURL+"/nodes/"+m.ID+"/fhir/Patient", nil)
			req.Header.Set("Authorization", "Bearer "+client)
			if resp, err := httpClient.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}
	// MembersReachable's status, and its reason and message as "reason: message".
	condition := func(ctx context.Context) (string, string, error) {
		gw, err := s.c.getGateway(ctx, cfg.namespace, gatewayName)
		if err != nil {
			return "", "", err
		}
		st, why := rollout.Condition(gw, "MembersReachable")
		return st, why, nil
	}
	ctx := context.Background()
	eventually(t, 4*pollInterval+time.Minute, "MembersReachable=True while every member answers", func(ctx context.Context) (bool, string, error) {
		st, why, err := condition(ctx)
		return st == "True", st + " " + why, err
	})
	scale := func(n int32) {
		t.Helper()
		sc, err := s.c.kube.AppsV1().Deployments(cfg.namespace).GetScale(ctx, "member-"+m.ID, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sc.Spec.Replicas = n
		if _, err := s.c.kube.AppsV1().Deployments(cfg.namespace).UpdateScale(ctx, "member-"+m.ID, sc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	scale(0)
	restored := false
	defer func() {
		if !restored {
			scale(1)
		}
	}()
	down := time.Now()
	eventually(t, 4*pollInterval+2*time.Minute, "MembersReachable=False naming "+endpoint, func(ctx context.Context) (bool, string, error) {
		poke()
		st, why, err := condition(ctx)
		return st == "False" && strings.HasPrefix(why, "MembersDown: ") && strings.Contains(why, endpoint+" down on "), st + " " + why, err
	})
	s.summary = append(s.summary, fmt.Sprintf("e2e polling: member %s scaled to 0: MembersReachable=False naming it %s later (poll interval %s)", m.ID, time.Since(down).Round(time.Second), pollInterval))
	if out := status(); !strings.Contains(out, "MembersReachable  False") || !strings.Contains(out, "member/"+endpoint) {
		t.Errorf("kubectl ferrofed status does not show the member down:\n%s", out)
	} else {
		t.Logf("kubectl ferrofed status:\n%s", out)
	}
	scale(1)
	restored = true
	back := time.Now()
	eventually(t, 4*pollInterval+3*time.Minute, "MembersReachable=True once the member is back", func(ctx context.Context) (bool, string, error) {
		poke()
		st, why, err := condition(ctx)
		return st == "True", st + " " + why, err
	})
	s.summary = append(s.summary, fmt.Sprintf("e2e polling: member %s back: MembersReachable=True %s after its scale-up", m.ID, time.Since(back).Round(time.Second)))
	if out := status(); !strings.Contains(out, "MembersReachable  True") {
		t.Errorf("kubectl ferrofed status does not show the member back:\n%s", out)
	}
}
