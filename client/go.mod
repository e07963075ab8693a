module github.com/guardian-sec/guardian/client

go 1.25
