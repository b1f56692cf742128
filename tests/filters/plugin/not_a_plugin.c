/* A shared object that is not a slipgate plugin: no slipgate_filter_plugin(). */
int not_a_plugin_answer(void);

int not_a_plugin_answer(void)
{
    return 42;
}
