package operator_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/controllers"
)

// replicaPods makes the pods the StatefulSet controller would run for sts's ordinals:
// controlled by sts, each mounting its claim, held by a finalizer so that a deletion
// shows (a pod deleted would stay, with its deletionTimestamp, until the test lets go).
func replicaPods(ctx context.Context, t *testing.T, sts *appsv1.StatefulSet, ordinals ...int) []types.NamespacedName {
	t.Helper()
	var keys []types.NamespacedName
	for _, n := range ordinals {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: sts.Namespace, Name: controllers.ReplicaPodName(sts.Name, n), Labels: sts.Spec.Template.Labels,
				Finalizers: []string{"ferrofed.io/test-hold"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts.Name, UID: sts.UID,
					Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
			Spec: sts.Spec.Template.Spec,
		}
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: controllers.SpoolVolumeName, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: controllers.SpoolClaimName(sts.Name, n)}}})
		if err := k8s.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, client.ObjectKeyFromObject(pod))
		t.Cleanup(func() {
			p := &corev1.Pod{}
			if k8s.Get(context.Background(), client.ObjectKeyFromObject(pod), p) == nil {
				p.Finalizers = nil
				_ = k8s.Update(context.Background(), p)
			}
		})
	}
	return keys
}

// podsRunOn checks that every pod exists and was never deleted.
func podsRunOn(ctx context.Context, pods []types.NamespacedName) error {
	for _, k := range pods {
		p := &corev1.Pod{}
		if err := k8s.Get(ctx, k, p); err != nil {
			return fmt.Errorf("pod %s: %w", k.Name, err)
		}
		if p.DeletionTimestamp != nil {
			return fmt.Errorf("pod %s is being deleted", k.Name)
		}
	}
	return nil
}

// collectOrphans does what the garbage collector does to finish a delete with
// propagationPolicy Orphan (envtest runs no garbage collector): it takes the
// StatefulSet's ownerReference off its pods, then the 'orphan' finalizer off the
// StatefulSet, which lets the apiserver remove it.
func collectOrphans(ctx context.Context, t *testing.T, sts *appsv1.StatefulSet, pods []types.NamespacedName) {
	t.Helper()
	for _, k := range pods {
		eventually(t, settle, "release pod "+k.Name, func() error {
			p := &corev1.Pod{}
			if err := k8s.Get(ctx, k, p); err != nil {
				return err
			}
			p.OwnerReferences = slices.DeleteFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == sts.UID })
			return k8s.Update(ctx, p)
		})
	}
	eventually(t, settle, "the orphan finalizer off the StatefulSet", func() error {
		s := &appsv1.StatefulSet{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(sts), s); err != nil || s.UID != sts.UID {
			return client.IgnoreNotFound(err)
		}
		s.Finalizers = slices.DeleteFunc(s.Finalizers, func(f string) bool { return f == metav1.FinalizerOrphanDependents })
		return k8s.Update(ctx, s)
	})
}

// beingOrphaned waits until the StatefulSet sts is being deleted with propagationPolicy
// Orphan: the apiserver gives such a deletion the 'orphan' finalizer (a Background
// delete none, with nothing holding the object it is gone; a Foreground one
// 'foregroundDeletion').
func beingOrphaned(ctx context.Context, t *testing.T, sts *appsv1.StatefulSet) {
	t.Helper()
	eventually(t, settle, "the StatefulSet deleted with propagationPolicy Orphan", func() error {
		s := &appsv1.StatefulSet{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(sts), s); err != nil {
			return err
		}
		if s.UID != sts.UID || s.DeletionTimestamp == nil || !slices.Equal(s.Finalizers, []string{metav1.FinalizerOrphanDependents}) {
			return fmt.Errorf("StatefulSet %s: deletionTimestamp %v, finalizers %v", s.UID, s.DeletionTimestamp, s.Finalizers)
		}
		return nil
	})
}

// TestAChangedClaimTemplateRecreatesTheStatefulSet: a StatefulSet's volumeClaimTemplates
// are immutable, so a larger storage request is refused by the apiserver. The operator
// deletes the StatefulSet with propagationPolicy Orphan (its pods are not deleted), tells
// it in a StatefulSetRecreated Event and in Ready (the claims keep their size), creates
// nothing while the old one is being deleted, and makes it again from the new template
// once it is gone; the Gateway gets Ready again, never stuck at ApplyFailed.
func TestAChangedClaimTemplateRecreatesTheStatefulSet(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	key := persistentGateway(ctx, t, "spool-resize", 2, nil)
	old := statefulSetOf(ctx, t, key)
	makeClaims(ctx, t, old, 0, 1)
	pods := replicaPods(ctx, t, old, 0, 1)
	readyStatefulSet(ctx, t, key)
	eventually(t, settle, "Ready=True", func() error {
		if c := condition(getGateway(ctx, t, key), ferrofedv1alpha1.ConditionReady); c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Ready %s %s %q", c.Status, c.Reason, c.Message)
		}
		return nil
	})

	updateGateway(ctx, t, key, func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Audit.Spool.VolumeClaimTemplate.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
	})
	beingOrphaned(ctx, t, old)
	if err := podsRunOn(ctx, pods); err != nil {
		t.Fatal(err)
	}
	eventually(t, settle, "a StatefulSetRecreated event naming the change and the claims", func() error {
		return eventSaid(ctx, key.Namespace, key.Name, controllers.EventStatefulSetRecreated,
			"propagationPolicy Orphan", "storage request 1Gi to 2Gi", "spool-"+key.Name+"-<n>", "keep their size")
	})
	eventually(t, settle, "Ready=False, StatefulSetRecreating, saying the claims keep their size", func() error {
		c := condition(getGateway(ctx, t, key), ferrofedv1alpha1.ConditionReady)
		if c.Status != metav1.ConditionFalse || c.Reason != ferrofedv1alpha1.ReasonStatefulSetRecreating {
			return fmt.Errorf("Ready %s %s %q", c.Status, c.Reason, c.Message)
		}
		return nil
	})
	// While the old StatefulSet is being deleted the operator waits (rechecking every
	// 2s): no other delete (which would take the pods), nothing created.
	time.Sleep(5 * time.Second)
	beingOrphaned(ctx, t, old)
	if err := podsRunOn(ctx, pods); err != nil {
		t.Fatal(err)
	}

	collectOrphans(ctx, t, old, pods)
	var sts *appsv1.StatefulSet
	eventually(t, settle, "a new StatefulSet from the new template", func() error {
		s := &appsv1.StatefulSet{}
		if err := k8s.Get(ctx, key, s); err != nil {
			return err
		}
		if s.UID == old.UID {
			return fmt.Errorf("still the old StatefulSet")
		}
		if q := s.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]; q.Cmp(resource.MustParse("2Gi")) != 0 {
			return fmt.Errorf("storage request %s", q.String())
		}
		sts = s
		return nil
	})
	if !metav1.IsControlledBy(sts, getGateway(ctx, t, key)) || !equalLabels(sts.Spec.Selector.MatchLabels, old.Spec.Selector.MatchLabels) {
		t.Errorf("new StatefulSet: owners %v, selector %v; want the Gateway's, the old selector %v", sts.OwnerReferences, sts.Spec.Selector, old.Spec.Selector)
	}
	if err := podsRunOn(ctx, pods); err != nil {
		t.Fatal(err)
	}
	readyStatefulSet(ctx, t, key)
	eventually(t, settle, "Ready=True again", func() error {
		if c := condition(getGateway(ctx, t, key), ferrofedv1alpha1.ConditionReady); c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Ready %s %s %q", c.Status, c.Reason, c.Message)
		}
		return nil
	})
	if err := eventSaid(ctx, key.Namespace, key.Name, "FailedApply"); err == nil {
		t.Error("a FailedApply event: the refused apply was answered by the re-create")
	}
	// The claims stay as they were (a template shapes only new claims); none is
	// orphaned or handed over.
	for _, n := range []int{0, 1} {
		c := &corev1.PersistentVolumeClaim{}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: controllers.SpoolClaimName(key.Name, n)}, c); err != nil || c.DeletionTimestamp != nil {
			t.Errorf("claim %d: %v, deletionTimestamp %v", n, err, c.DeletionTimestamp)
		} else if q := c.Spec.Resources.Requests[corev1.ResourceStorage]; q.Cmp(resource.MustParse("1Gi")) != 0 {
			t.Errorf("claim %d requests %s, want its 1Gi still", n, q.String())
		}
	}
	if js, err := handOverJobs(ctx, key.Name); err != nil || len(js) != 0 {
		t.Errorf("hand-over Jobs %v (%v), want none", js, err)
	}
}

// TestAGatewayDeletedWhileItsStatefulSetIsRecreatedTakesIt: a Gateway deleted before the
// garbage collector finished the Orphan delete of its StatefulSet deletes it again with
// propagationPolicy Background (no pod is left running without a controller); the
// apiserver takes the 'orphan' finalizer off, and the StatefulSet goes.
func TestAGatewayDeletedWhileItsStatefulSetIsRecreatedTakesIt(t *testing.T) {
	needControlPlane(t)
	ctx := context.Background()
	key := persistentGateway(ctx, t, "spool-resize-gone", 1, nil)
	old := statefulSetOf(ctx, t, key)
	updateGateway(ctx, t, key, func(g *ferrofedv1alpha1.Gateway) {
		g.Spec.Audit.Spool.VolumeClaimTemplate.Spec.StorageClassName = ptr.To("fast")
	})
	beingOrphaned(ctx, t, old)
	if err := k8s.Delete(ctx, &ferrofedv1alpha1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, settle, "the StatefulSet gone and the Gateway with it", func() error {
		s := &appsv1.StatefulSet{}
		if err := k8s.Get(ctx, key, s); err == nil {
			return fmt.Errorf("StatefulSet still there, finalizers %v", s.Finalizers)
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		if err := k8s.Get(ctx, key, &ferrofedv1alpha1.Gateway{}); err == nil {
			return errors.New("Gateway still there")
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	})
}
