mod dependencies;
mod messages;
mod reducer;
mod reducer_props;
