// Package controllers holds the ShellPool and ShellJob reconcilers of the
// operator. It does the I/O only: placement decisions live in
// internal/scheduler and status helpers in internal/shelljob.
//
// The operator is namespaced: it watches the namespace it runs in, and its
// RBAC is a Role there, never cluster-wide.
package controllers

// The operator's permissions, least privilege: worker pods and exec into
// them, Events, its own CRDs, and the ConfigMap that holds the job counter.
//
// +kubebuilder:rbac:groups=core,namespace=shelljob-system,resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=core,namespace=shelljob-system,resources=pods/exec,verbs=create;get
// +kubebuilder:rbac:groups=core,namespace=shelljob-system,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,namespace=shelljob-system,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=core,namespace=shelljob-system,resources=configmaps,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=shell.shelljob.dev,namespace=shelljob-system,resources=shelljobs,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=shell.shelljob.dev,namespace=shelljob-system,resources=shelljobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=shell.shelljob.dev,namespace=shelljob-system,resources=shellpools,verbs=get;list;watch
// +kubebuilder:rbac:groups=shell.shelljob.dev,namespace=shelljob-system,resources=shellpools/status,verbs=get;update;patch
