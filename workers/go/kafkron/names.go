package kafkron

import "fmt"

// Names of the topics contract (topics/names.py).
type Names struct{ Namespace string }

// Topic is {ns}.{kind}.
func (n Names) Topic(kind string) string { return n.Namespace + "." + kind }

// WorkerGroup is {ns}-workers.
func (n Names) WorkerGroup() string { return n.Namespace + "-workers" }

// WorkerTransactionalID is {ns}.worker.{p} (docs/WORKER-PROTOCOL.md §2.1).
func (n Names) WorkerTransactionalID(partition int32) string {
	return fmt.Sprintf("%s.worker.%d", n.Namespace, partition)
}
