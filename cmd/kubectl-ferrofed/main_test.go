package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/controllers"
	"github.com/ferrofed/ferrofed/test/controlplane"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/")

// fixture is a Gateway with a status of every kind the commands print: conditions
// (one False), three polled pods (one unread), a member down, drains (one cut), claims.
func fixture() *ferrofedv1alpha1.Gateway {
	at := func(s string) metav1.Time {
		t, _ := time.Parse(time.RFC3339, s)
		return metav1.NewTime(t)
	}
	poll := at("2026-12-06T10:00:00Z")
	return &ferrofedv1alpha1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: "clinic", Name: "front", Generation: 1},
		Spec:       ferrofedv1alpha1.GatewaySpec{Image: "ghcr.io/ferrofed/ferrofed:1.0", Replicas: ptr.To[int32](3)},
		Status: ferrofedv1alpha1.GatewayStatus{
			ObservedGeneration: 1, Replicas: 3, ReadyReplicas: 3, TerminationGracePeriodSeconds: 50,
			GracePeriod: &ferrofedv1alpha1.GracePeriodBreakdown{DrainDelay: "10s", DrainDelayDerived: true, ShutdownTimeout: "30s",
				BindingsDrainTimeout: "5s", TerminationHeadroom: "5s"},
			Conditions: []metav1.Condition{
				{Type: ferrofedv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: ferrofedv1alpha1.ReasonReplicasReady, Message: "3 of 3 pods ready.", LastTransitionTime: poll},
				{Type: ferrofedv1alpha1.ConditionMembersReachable, Status: metav1.ConditionFalse, Reason: ferrofedv1alpha1.ReasonMembersDown,
					Message: "Members not reachable: lab-query down on 2 of 2 replicas.", LastTransitionTime: poll},
				{Type: ferrofedv1alpha1.ConditionBindingsHealthy, Status: metav1.ConditionTrue, Reason: ferrofedv1alpha1.ReasonAllBindingsUp,
					Message: "Every replica read (2) reports every binding up.\nsecond line", LastTransitionTime: poll},
			},
			Drains: []ferrofedv1alpha1.DrainRecord{
				{Pod: "front-7d9f-a", Ended: at("2026-12-06T09:00:00Z"), Outcome: "completed", DurationMilliseconds: 12_300, GracePeriodSeconds: 50},
				{Pod: "front-7d9f-b", Ended: at("2026-12-06T08:00:00Z"), Outcome: "cut", DurationMilliseconds: 41_000, GracePeriodSeconds: 50,
					CutConnections: 3, AbandonedBindings: []string{"consent", "audit_repository"}, ExitCode: 0},
			},
			Dependencies: &ferrofedv1alpha1.DependenciesStatus{
				LastPollTime: &poll, ReplicasPolled: 3, ReplicasRead: 2, MembersReachable: "1/2",
				Keys: []ferrofedv1alpha1.DependencyKeyStatus{
					{Key: "member/lab-query", State: "down", Down: 2},
					{Key: "consent", State: "up", Up: 2},
					{Key: "member/ward-query", State: "up", Up: 2},
				},
				Pods: []ferrofedv1alpha1.PolledPodStatus{
					{Name: "front-7d9f-c", Lifecycle: "serving", NotUp: []string{"member/lab-query=down"}},
					{Name: "front-7d9f-d", Lifecycle: "serving", NotUp: []string{"member/lab-query=down"}},
					{Name: "front-7d9f-e", Message: "the pod did not answer in time"},
				},
			},
			Audit: &ferrofedv1alpha1.AuditStatus{OrphanedClaims: 1, UndeliveredRecords: 120, UndeliveredBytes: 48_000,
				Claims: []ferrofedv1alpha1.SpoolClaimStatus{{Name: "spool-front-0", Replica: "front-0"}, {Name: "spool-front-3", Replica: "orphaned"}}},
		},
	}
}

// commands are the commands of the golden files, each with its exit code.
var commands = []struct {
	golden string
	args   []string
	code   int
}{
	{"status.golden", []string{"status", "front"}, 0},
	{"drains.golden", []string{"drains", "front"}, 0},
	{"report.golden", []string{"report", "front"}, 0},
	{"report-pod.golden", []string{"report", "front", "--pod", "front-7d9f-c"}, 0},
	{"report-unread-pod.golden", []string{"report", "front", "--pod", "front-7d9f-e"}, 2},
	{"check-admitted.golden", []string{"check", "-f", "testdata/admitted.yaml"}, 0},
	{"check-refused.golden", []string{"check", "-f", "testdata/refused.yaml"}, 1},
	{"check-not-a-gateway.golden", []string{"check", "-f", "testdata/not-a-gateway.yaml"}, 2},
}

// golden compares got with testdata/name (or writes it with -update).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test ./cmd/kubectl-ferrofed -run Golden -update rewrites it):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// TestGoldenOutputs runs each command's printer on the fixture (check on its
// manifest) and compares with its golden file: the text users read.
func TestGoldenOutputs(t *testing.T) {
	gw := fixture()
	for _, c := range commands {
		t.Run(c.golden, func(t *testing.T) {
			var out bytes.Buffer
			var err error
			switch c.args[0] {
			case "status":
				err = writeStatus(&out, gw)
			case "drains":
				err = writeDrains(&out, gw)
			case "report":
				pod := ""
				if len(c.args) > 3 {
					pod = c.args[3]
				}
				err = writeReport(&out, gw, pod)
			case "check":
				var data []byte
				if data, err = readManifest(c.args[2]); err == nil {
					err = writeCheck(&out, data)
				}
			}
			if err != nil && err != errRefused { // run prints the others, as here
				out.WriteString("Error: " + err.Error() + "\n")
			}
			if code := exitCode(err); code != c.code {
				t.Errorf("exit %d, want %d (%v)", code, c.code, err)
			}
			golden(t, c.golden, out.Bytes())
		})
	}
}

func exitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case err == errRefused:
		return 1
	}
	return 2
}

// TestTheCommandsAgainstAnAPIServer runs the plugin as kubectl runs it (its arguments,
// a kubeconfig, -n) against a real kube-apiserver holding the fixture with its status:
// every output is the golden file's.
func TestTheCommandsAgainstAnAPIServer(t *testing.T) {
	assets := controlplane.Require(t, false)
	env := &envtest.Environment{BinaryAssetsDirectory: assets, ErrorIfCRDPathMissing: true,
		CRDDirectoryPaths: []string{filepath.Join("..", "..", "config", "crd", "bases")}}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	scheme, err := controllers.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want := fixture()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: want.Namespace}}); err != nil {
		t.Fatal(err)
	}
	gw := fixture()
	gw.Status = ferrofedv1alpha1.GatewayStatus{}
	if err := c.Create(ctx, gw); err != nil {
		t.Fatal(err)
	}
	gw.Status = want.Status
	if err := c.Status().Update(ctx, gw); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range commands {
		t.Run(cmd.golden, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(append([]string{"--kubeconfig", kubeconfig, "-n", want.Namespace}, cmd.args...), &out, &errOut)
			if code != cmd.code {
				t.Fatalf("exit %d, want %d: %s", code, cmd.code, errOut.String())
			}
			out.Write(errOut.Bytes())
			golden(t, cmd.golden, out.Bytes())
		})
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"--kubeconfig", kubeconfig, "-n", want.Namespace, "status", "absent"}, &out, &errOut); code != 2 ||
		!strings.Contains(errOut.String(), "clinic/absent") || !strings.Contains(errOut.String(), "not found") {
		t.Errorf("status of a Gateway that does not exist: exit %d, %s", code, errOut.String())
	}
}
