package rollout

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Member is one FHIR member test server (test/doubles/members/fhirmember) running as a
// Deployment named member-<ID> with a Service of the same name.
type Member struct {
	ID    string
	Delay time.Duration // how long it waits before answering
	URL   string        // http://<ClusterIP>:8080/fhir once deployed
}

// DeployMember creates the member's Deployment (one replica of image, never pulled) and
// Service, or finds them from an earlier call, and sets m.URL. No cluster DNS is
// assumed: the gateway reaches members by ClusterIP.
func DeployMember(ctx context.Context, kube kubernetes.Interface, ns, image string, m *Member) error {
	labels := map[string]string{"app.kubernetes.io/name": "fhir-member", "ferrofed.io/member": m.ID}
	args := []string{"-listen", "0.0.0.0:8080", "-id", m.ID}
	if m.Delay > 0 {
		args = append(args, "-delay", m.Delay.String())
	}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "member-" + m.ID, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To(int64(2)),
					Containers: []corev1.Container{{
						Name: "member", Image: image, ImagePullPolicy: corev1.PullNever,
						Args:  args,
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
							PeriodSeconds: 1,
						},
					}},
				},
			},
		},
	}
	if _, err := kube.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create member %s: %w", m.ID, err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "member-" + m.ID, Namespace: ns, Labels: labels},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromString("http")}},
		},
	}
	created, err := kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = kube.CoreV1().Services(ns).Get(ctx, svc.Name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("create member Service %s: %w", m.ID, err)
	}
	m.URL = fmt.Sprintf("http://%s:8080/fhir", created.Spec.ClusterIP)
	return nil
}

// RolledOut reports whether a Deployment finished its rollout: every replica updated and
// available, no old replica counted, and the controller saw the latest generation.
func RolledOut(d *appsv1.Deployment) (bool, string) {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	detail := fmt.Sprintf("generation %d/%d, replicas %d, updated %d, ready %d, available %d (want %d)",
		s.ObservedGeneration, d.Generation, s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas, want)
	return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.Replicas == want &&
		s.AvailableReplicas == want && s.ReadyReplicas == want, detail
}
