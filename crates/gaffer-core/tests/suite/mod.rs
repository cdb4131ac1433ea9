mod reducer;
mod reducer_props;
mod messages;
