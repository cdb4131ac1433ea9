mod approvals;
mod projects;
mod seed000;
mod support;
