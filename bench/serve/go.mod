module github.com/htqueue/htq/bench/serve

go 1.26.0
