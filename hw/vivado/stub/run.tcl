# Dry run of a Vivado Tcl script under plain tclsh (no Vivado on the build machines).
#
#   tclsh hw/vivado/stub/run.tcl EVENTS.jsonl SCRIPT.tcl [ARGS...]
#
# Defines the Vivado commands the flow uses as stubs that record each call -- command name, its
# words, and the value the stub returned -- as one JSON object per line in EVENTS.jsonl, then
# sources SCRIPT.tcl with ARGS as ::argv (what `vivado -mode batch -source SCRIPT -tclargs ARGS`
# gives it). A command Vivado does not have is not defined, so a misspelt command stops the run.
# `file copy` and `file mkdir` are recorded instead of done: a dry run writes nothing.
# tests/test_vivado.py interprets the events (cells, connections, properties, files read).
# Exit status 0 when the script ran to its end (or called `exit 0`), 1 otherwise.

namespace eval stub {
    variable events {}
    variable out ""
    variable seq 0
}

proc stub::json_str {s} {
    set map [list "\\" "\\\\" "\"" "\\\"" "\n" "\\n" "\r" "\\r" "\t" "\\t"]
    return "\"[string map $map $s]\""
}

proc stub::json_list {items} {
    set parts {}
    foreach i $items { lappend parts [json_str $i] }
    return "\[[join $parts ,]\]"
}

proc stub::record {cmd words result} {
    variable events
    lappend events "{\"cmd\": [json_str $cmd], \"args\": [json_list $words], \"result\": [json_str $result]}"
    return $result
}

proc stub::dump {status message} {
    variable events
    variable out
    set fh [open $out w]
    foreach e $events { puts $fh $e }
    puts $fh "{\"cmd\": \"__end__\", \"args\": [json_list [list $status]], \"result\": [json_str $message]}"
    close $fh
}

# words that are not option values: the positional arguments of a call
proc stub::positional {words flags} {
    set pos {}
    for {set i 0} {$i < [llength $words]} {incr i} {
        set w [lindex $words $i]
        if {[string index $w 0] eq "-" && ![string is double -strict $w]} {
            if {[lsearch -exact $flags $w] < 0} { incr i }
        } else {
            lappend pos $w
        }
    }
    return $pos
}

# value of option `opt` in words, or ""
proc stub::opt {words opt} {
    set i [lsearch -exact $words $opt]
    if {$i < 0} { return "" }
    return [lindex $words [expr {$i + 1}]]
}

proc stub::handle {kind name} {
    if {[string match "${kind}:*" $name]} { return $name }
    return "${kind}:[string trimleft $name /]"
}

# a stub that records its call and returns `result` (a constant or a script in words/pos)
proc stub::define {name flags body} {
    proc ::$name {args} [format {
        set words $args
        set pos [stub::positional $words {%s}]
        set result [apply {{words pos} {%s}} $words $pos]
        return [stub::record %s $words $result]
    } $flags $body $name]
}

# -- project, files, runs ---------------------------------------------------------------
set stub::flags {-force -quiet -verbose -in_memory -norecurse -import_files -set_current -top
    -ip -unique -reset -no_script -fileset -nocomplain -short -all -gui -nolog -nojournal
    -generate_synth_checkpoint -strict -skip_ip_check -ignore_errors}

foreach {name body} {
    create_project       {return [stub::handle project [lindex $pos 0]]}
    open_project         {return [stub::handle project [lindex $pos 0]]}
    current_project      {return "project:current"}
    close_project        {return ""}
    current_fileset      {return "fileset:sources_1"}
    get_filesets         {return [stub::handle fileset [lindex $pos 0]]}
    get_projects         {return "project:current"}
    get_parts            {return [lindex $pos 0]}
    add_files            {return ""}
    import_files         {return ""}
    read_verilog         {return ""}
    read_xdc             {return ""}
    get_files            {return [stub::handle file [lindex $pos 0]]}
    set_property         {return ""}
    get_property         {
        set prop [lindex $pos 0]
        switch -- $prop {
            PROGRESS  {return "100%"}
            STATUS    {return "write_bitstream Complete!"}
            DIRECTORY {return "STUB_DIR"}
            default   {return "STUB($prop)"}
        }
    }
    update_compile_order {return ""}
    update_ip_catalog    {return ""}
    generate_target      {return ""}
    make_wrapper         {
        regsub {^[a-z_]+:} [stub::opt $words -files] {} bd
        return "STUB_DIR/[file rootname [file tail $bd]]_wrapper.v"
    }
    launch_runs          {return ""}
    wait_on_run          {return ""}
    get_runs             {return [stub::handle run [lindex $pos 0]]}
    open_run             {return ""}
    reset_run            {return ""}
    report_utilization   {return ""}
    report_timing_summary {return ""}
    write_bitstream      {return ""}
    write_hw_platform    {return ""}
    version              {return "2024.1"}
    package_xo           {return ""}
    create_bd_design     {return [stub::handle bd_design [lindex $pos 0]]}
    open_bd_design       {return ""}
    current_bd_design    {return "bd_design:current"}
    current_bd_instance  {return ""}
    create_bd_cell       {return [stub::handle bd_cell [lindex $pos 0]]}
    create_bd_port       {return [stub::handle bd_port [lindex $pos 0]]}
    create_bd_intf_port  {return [stub::handle bd_intf_port [lindex $pos 0]]}
    get_bd_cells         {return [stub::handle bd_cell [lindex $pos 0]]}
    get_bd_pins          {return [stub::handle bd_pin [lindex $pos 0]]}
    get_bd_intf_pins     {return [stub::handle bd_intf_pin [lindex $pos 0]]}
    get_bd_ports         {return [stub::handle bd_port [lindex $pos 0]]}
    get_bd_intf_ports    {return [stub::handle bd_intf_port [lindex $pos 0]]}
    get_bd_addr_segs     {return [stub::handle bd_addr_seg [lindex $pos 0]]}
    connect_bd_net       {return ""}
    connect_bd_intf_net  {return ""}
    apply_bd_automation  {return ""}
    assign_bd_address    {return ""}
    validate_bd_design   {return ""}
    save_bd_design       {return ""}
    regenerate_bd_layout {return ""}
    current_design       {return "design:current"}
    get_ports            {return [stub::handle port [lindex $pos 0]]}
    get_clocks           {return [stub::handle clock [lindex $pos 0]]}
    create_clock         {return [stub::handle clock [stub::opt $words -name]]}
    set_false_path       {return ""}
    set_input_delay      {return ""}
    set_output_delay     {return ""}
} {
    stub::define $name $stub::flags $body
}

# -- IP packager (ipx::) ----------------------------------------------------------------
namespace eval ipx {}
foreach {name body} {
    ipx::package_project       {return "core:current"}
    ipx::current_core          {return "core:current"}
    ipx::open_ipxact_file      {return "core:current"}
    ipx::add_bus_interface     {return [stub::handle bus_interface [lindex $pos 0]]}
    ipx::get_bus_interfaces    {return [stub::handle bus_interface [lindex $pos 0]]}
    ipx::remove_bus_interface  {return ""}
    ipx::add_port_map          {
        set bif [string range [lindex $pos 1] [string length bus_interface:] end]
        return "port_map:$bif/[lindex $pos 0]"
    }
    ipx::add_bus_parameter     {
        set bif [string range [lindex $pos 1] [string length bus_interface:] end]
        return "bus_parameter:$bif/[lindex $pos 0]"
    }
    ipx::get_bus_parameters    {
        set bif [string range [stub::opt $words -of_objects] [string length bus_interface:] end]
        return "bus_parameter:$bif/[lindex $pos 0]"
    }
    ipx::remove_bus_parameter  {return ""}
    ipx::associate_bus_interfaces {return ""}
    ipx::get_user_parameters   {return [stub::handle user_parameter [lindex $pos 0]]}
    ipx::get_hdl_parameters    {return [stub::handle hdl_parameter [lindex $pos 0]]}
    ipx::add_memory_map        {return [stub::handle memory_map [lindex $pos 0]]}
    ipx::get_memory_maps       {return [stub::handle memory_map [lindex $pos 0]]}
    ipx::remove_memory_map     {return ""}
    ipx::add_address_block     {return [stub::handle address_block [lindex $pos 0]]}
    ipx::get_address_blocks    {return [stub::handle address_block [lindex $pos 0]]}
    ipx::create_xgui_files     {return ""}
    ipx::update_checksums      {return ""}
    ipx::check_integrity       {return ""}
    ipx::save_core             {return ""}
    ipx::unload_core           {return ""}
} {
    stub::define $name $stub::flags $body
}

# `file copy`/`file mkdir` are recorded, not done; every other `file` subcommand is Tcl's own
rename ::file ::stub::tcl_file
proc ::file {sub args} {
    if {$sub in {copy mkdir delete}} {
        return [stub::record "file $sub" $args ""]
    }
    return [uplevel 1 [list ::stub::tcl_file $sub {*}$args]]
}

rename ::exit ::stub::tcl_exit
proc ::exit {{status 0}} {
    stub::dump $status "exit"
    stub::tcl_exit $status
}

proc stub::main {argv} {
    if {[llength $argv] < 2} {
        puts stderr "usage: tclsh run.tcl EVENTS.jsonl SCRIPT.tcl \[ARGS...\]"
        stub::tcl_exit 2
    }
    set stub::out [lindex $argv 0]
    set script [lindex $argv 1]
    set ::argv [lrange $argv 2 end]
    set ::argc [llength $::argv]
    set ::argv0 $script
    if {[catch {uplevel #0 [list source $script]} msg opts]} {
        puts stderr [dict get $opts -errorinfo]
        stub::dump 1 $msg
        stub::tcl_exit 1
    }
    stub::dump 0 "end"
    stub::tcl_exit 0
}

stub::main $argv
