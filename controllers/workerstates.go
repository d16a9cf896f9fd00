package controllers

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
)

// workerStates holds what each worker's agent last said of itself
// (agentapi.EventWorker), by pod: whether its spool has room, which
// placement reads, and how it isolates jobs, which the pool's conditions
// say. The event streams write it.
type workerStates struct {
	mu     sync.Mutex
	states map[types.NamespacedName]agentapi.Worker
	// changed, if set, is called with the pod's pool, outside the lock,
	// when a state changed.
	changed func(pool types.NamespacedName)
}

func newWorkerStates() *workerStates {
	return &workerStates{states: map[types.NamespacedName]agentapi.Worker{}}
}

// set records pod's state, and calls changed when it is news.
func (s *workerStates) set(pod, pool types.NamespacedName, w agentapi.Worker) {
	s.mu.Lock()
	old, ok := s.states[pod]
	s.states[pod] = w
	changed := s.changed
	s.mu.Unlock()
	// The byte counts move all the time; only what decides something is news.
	news := !ok || old.SpoolFull != w.SpoolFull || old.Isolation != w.Isolation || old.IsolationLimit != w.IsolationLimit
	if news && changed != nil {
		changed(pool)
	}
}

// forget drops the state of a pod whose stream ended for good.
func (s *workerStates) forget(pod types.NamespacedName) {
	s.mu.Lock()
	delete(s.states, pod)
	s.mu.Unlock()
}

// get returns pod's state, if its agent reported one.
func (s *workerStates) get(pod types.NamespacedName) (agentapi.Worker, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.states[pod]
	return w, ok
}

// spoolFull tells whether pod's agent said it takes no new job.
func (s *workerStates) spoolFull(pod types.NamespacedName) bool {
	w, ok := s.get(pod)
	return ok && w.SpoolFull
}

// poolConditions are the JobsIsolated and SpoolRoom conditions of a pool
// whose current workers are pods.
func (s *workerStates) poolConditions(pods []types.NamespacedName) []metav1.Condition {
	var reported int
	var exposed, full []string
	why := map[string]bool{}
	for _, pod := range pods {
		w, ok := s.get(pod)
		if !ok {
			continue
		}
		reported++
		if w.Isolation != agentapi.IsolationNamespaces {
			exposed = append(exposed, pod.Name)
			why[w.IsolationLimit] = true
		}
		if w.SpoolFull {
			full = append(full, pod.Name)
		}
	}
	slices.Sort(exposed)
	slices.Sort(full)
	isolated := metav1.Condition{Type: shellv1alpha1.ShellPoolJobsIsolated}
	switch {
	case len(exposed) > 0:
		reasons := make([]string, 0, len(why))
		for r := range why {
			reasons = append(reasons, r)
		}
		slices.Sort(reasons)
		isolated.Status, isolated.Reason = metav1.ConditionFalse, shellv1alpha1.ShellPoolJobsIsolatedReasonProcessesVisible
		isolated.Message = fmt.Sprintf("workers %s run jobs in the pod's namespaces: %s", strings.Join(exposed, ", "), strings.Join(reasons, "; "))
	case reported == 0:
		isolated.Status, isolated.Reason = metav1.ConditionUnknown, shellv1alpha1.ShellPoolJobsIsolatedReasonNotReported
		isolated.Message = "no worker's agent said how it isolates jobs yet (an agent older than the report says nothing)"
	default:
		isolated.Status, isolated.Reason = metav1.ConditionTrue, shellv1alpha1.ShellPoolJobsIsolatedReasonNamespaces
		isolated.Message = fmt.Sprintf("the %d workers that reported run each job in user, PID, mount and IPC namespaces of its own", reported)
	}
	room := metav1.Condition{Type: shellv1alpha1.ShellPoolSpoolRoom, Status: metav1.ConditionTrue,
		Reason: shellv1alpha1.ShellPoolSpoolRoomReasonRoom, Message: "every worker has room in its spool for another job"}
	if len(full) > 0 {
		room.Status, room.Reason = metav1.ConditionFalse, shellv1alpha1.ShellPoolSpoolRoomReasonSpoolFull
		room.Message = fmt.Sprintf("the spools of %s are full of output not delivered yet: they take no new job until some is", strings.Join(full, ", "))
	}
	return []metav1.Condition{isolated, room}
}
