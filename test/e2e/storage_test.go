//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The volume provisioner the persistent audit spool is tested on: hack/local-cluster.sh
// installs rancher's local-path-provisioner with the default StorageClass local-path
// (WaitForFirstConsumer, reclaim Delete). Another cluster names its own class and an
// image with /bin/sh (FERROFED_E2E_STORAGE_CLASS, FERROFED_E2E_SHELL_IMAGE).
var (
	storageClass = env("FERROFED_E2E_STORAGE_CLASS", "local-path")
	shellImage   = env("FERROFED_E2E_SHELL_IMAGE", "ferrofed.local/busybox:static")
)

const storageNamespace = "ferrofed-e2e-storage"

// TestVolumeProvisioner proves the cluster's volume provisioner the way a gateway's
// spool uses a claim: a claim of the class waits for its first consumer, then binds;
// a pod running as the gateway's user (65532) writes a file; the pod is deleted and a
// new pod on the same claim reads the file back; deleting the claim deletes its
// volume, and with it the folder the provisioner made on the node.
func TestVolumeProvisioner(t *testing.T) {
	c := connect(t)
	ctx := context.Background()
	sc, err := c.kube.StorageV1().StorageClasses().Get(ctx, storageClass, metav1.GetOptions{})
	if err != nil {
		if os.Getenv("FERROFED_E2E_REQUIRE_LOCAL") == "1" {
			t.Fatalf("StorageClass %s: %v (hack/local-cluster.sh up installs it; `hack/local-cluster.sh storage` again)", storageClass, err)
		}
		t.Skipf("no StorageClass %s on this cluster (FERROFED_E2E_STORAGE_CLASS): %v", storageClass, err)
	}
	mode := "Immediate"
	if sc.VolumeBindingMode != nil {
		mode = string(*sc.VolumeBindingMode)
	}
	reclaim := "Delete"
	if sc.ReclaimPolicy != nil {
		reclaim = string(*sc.ReclaimPolicy)
	}
	t.Logf("StorageClass %s: provisioner %s, binding %s, reclaim %s, default %q", sc.Name, sc.Provisioner, mode, reclaim, sc.Annotations["storageclass.kubernetes.io/is-default-class"])
	if mode != "WaitForFirstConsumer" || reclaim != "Delete" {
		t.Errorf("StorageClass %s: binding %s and reclaim %s, want WaitForFirstConsumer and Delete", sc.Name, mode, reclaim)
	}
	c.freshNamespace(t, storageNamespace)
	if !cfg.keep {
		t.Cleanup(func() {
			_ = c.kube.CoreV1().Namespaces().Delete(context.Background(), storageNamespace, metav1.DeleteOptions{})
		})
	}
	pvcs := c.kube.CoreV1().PersistentVolumeClaims(storageNamespace)

	// 1. A claim of the class: Pending until a pod uses it.
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "proof", Namespace: storageNamespace},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(storageClass),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}},
		},
	}
	if _, err := pvcs.Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create claim: %v", err)
	}
	time.Sleep(2 * time.Second)
	if got, err := pvcs.Get(ctx, claim.Name, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if mode == "WaitForFirstConsumer" && (got.Status.Phase != corev1.ClaimPending || got.Spec.VolumeName != "") {
		t.Errorf("claim %s without a consumer: phase %s, volume %q; want Pending and no volume (WaitForFirstConsumer)", claim.Name, got.Status.Phase, got.Spec.VolumeName)
	}

	// 2. A pod as the gateway's user writes a file on it; the claim binds.
	token := fmt.Sprintf("written-by-%d", time.Now().UnixNano())
	start := time.Now()
	c.runToCompletion(t, shellPod("writer", claim.Name, fmt.Sprintf("echo %s > /data/proof && sync && ls -ln /data", token)))
	written := time.Since(start)
	bound, err := pvcs.Get(ctx, claim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if bound.Status.Phase != corev1.ClaimBound || bound.Spec.VolumeName == "" {
		t.Fatalf("claim %s after its first pod: phase %s, volume %q; want Bound", claim.Name, bound.Status.Phase, bound.Spec.VolumeName)
	}
	pv, err := c.kube.CoreV1().PersistentVolumes().Get(ctx, bound.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	folder := ""
	switch {
	case pv.Spec.HostPath != nil:
		folder = pv.Spec.HostPath.Path
	case pv.Spec.Local != nil:
		folder = pv.Spec.Local.Path
	}
	t.Logf("claim %s bound to %s (%s, reclaim %s, folder %q, node affinity %v); the writer pod done %s after it was created",
		claim.Name, pv.Name, pv.Spec.Capacity.Storage(), pv.Spec.PersistentVolumeReclaimPolicy, folder, pv.Spec.NodeAffinity != nil, written.Round(100*time.Millisecond))
	// On the local node the folder is on this machine: the file is there.
	onThisMachine := false
	if folder != "" {
		if b, err := os.ReadFile(filepath.Join(folder, "proof")); err == nil {
			onThisMachine = true
			if strings.TrimSpace(string(b)) != token {
				t.Errorf("%s on the node holds %q, want %q", filepath.Join(folder, "proof"), b, token)
			}
		}
	}

	if !onThisMachine && os.Getenv("FERROFED_E2E_REQUIRE_LOCAL") == "1" {
		t.Errorf("the volume's folder %q is not on this machine, but FERROFED_E2E_REQUIRE_LOCAL=1 (the local node) requires it", folder)
	}

	// 3. The writer is gone; a new pod on the same claim reads the file back.
	start = time.Now()
	logs := c.runToCompletion(t, shellPod("reader", claim.Name, "cat /data/proof"))
	if strings.TrimSpace(logs) != token {
		t.Errorf("the second pod on claim %s read %q, want %q (the first pod's file)", claim.Name, strings.TrimSpace(logs), token)
	} else {
		t.Logf("a new pod on claim %s read the first pod's file back (%s)", claim.Name, time.Since(start).Round(100*time.Millisecond))
	}

	// 4. Deleting the claim deletes its volume and, on the node, its folder.
	start = time.Now()
	if err := pvcs.Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the volume "+pv.Name+" deleted after its claim", func(ctx context.Context) (bool, string, error) {
		got, err := c.kube.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", err
		}
		return false, "phase " + string(got.Status.Phase), nil
	})
	if onThisMachine {
		eventually(t, 30*time.Second, "the folder "+folder+" removed from the node", func(context.Context) (bool, string, error) {
			_, err := os.Stat(folder)
			return errors.Is(err, os.ErrNotExist), fmt.Sprint(err), nil
		})
		t.Logf("claim deleted: volume %s and folder %s gone %s later", pv.Name, folder, time.Since(start).Round(100*time.Millisecond))
	} else {
		t.Logf("claim deleted: volume %s gone %s later (its folder is not on this machine)", pv.Name, time.Since(start).Round(100*time.Millisecond))
	}
}

// shellPod runs script with /bin/sh as user 65532 (the gateway's) with the claim
// mounted at /data.
func shellPod(name, claim, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: storageNamespace},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To(int64(1)),
			SecurityContext:               &corev1.PodSecurityContext{RunAsUser: ptr.To(int64(65532)), RunAsGroup: ptr.To(int64(65532))},
			Containers: []corev1.Container{{
				Name: "sh", Image: shellImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Command:      []string{"/bin/sh", "-c", script},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
			}}},
		},
	}
}

// runToCompletion creates pod, waits until it succeeded, returns its log and deletes it
// (waiting until it is gone, so the next pod on the same claim is a new one).
func (c *cluster) runToCompletion(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	ctx := context.Background()
	pods := c.kube.CoreV1().Pods(pod.Namespace)
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
	eventually(t, 2*time.Minute, "pod "+pod.Name+" succeeded", func(ctx context.Context) (bool, string, error) {
		p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		if p.Status.Phase == corev1.PodFailed {
			return false, "", fmt.Errorf("pod %s failed: %s", pod.Name, podLog(ctx, c, p))
		}
		detail := "phase " + string(p.Status.Phase)
		for _, cond := range p.Status.Conditions {
			if cond.Status != corev1.ConditionTrue && cond.Message != "" {
				detail += "; " + cond.Message
			}
		}
		return p.Status.Phase == corev1.PodSucceeded, detail, nil
	})
	logs := podLog(ctx, c, pod)
	if err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "pod "+pod.Name+" gone", func(ctx context.Context) (bool, string, error) {
		_, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), "still there", nil
	})
	return logs
}

func podLog(ctx context.Context, c *cluster, pod *corev1.Pod) string {
	rc, err := c.kube.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).Stream(ctx)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer rc.Close()
	b, _ := io.ReadAll(io.LimitReader(rc, 64<<10))
	return string(b)
}
