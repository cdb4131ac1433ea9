mod approvals;
mod audit;
mod grants;
mod projects;
mod seed000;
mod support;
