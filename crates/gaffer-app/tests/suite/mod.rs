mod approvals;
mod audit;
mod projects;
mod seed000;
mod support;
