module github.com/htqueue/htq/bench/all

go 1.26.0
